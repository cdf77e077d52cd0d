package budget

// Queued is how many Reserve calls wait in b's queue for the next batch:
// tests wait on it to know a call is queued behind a batch in flight.
func Queued(b *Budget) int {
	b.batch.mu.Lock()
	defer b.batch.mu.Unlock()
	return len(b.batch.queue)
}
