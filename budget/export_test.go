package budget

// Queued is how many Reserve calls wait in b's queue for the next batch:
// tests wait on it to know a call is queued behind a batch in flight.
func Queued(b *Budget) int {
	b.batch.mu.Lock()
	defer b.batch.mu.Unlock()
	return len(b.batch.queue)
}

// encode is appendEncoded as a string.
func (bd body) encode() string {
	return string(bd.appendEncoded(nil))
}

// plain is appendPlain as a string.
func (bd body) plain() (string, bool) {
	out, ok := bd.appendPlain(nil)
	return string(out), ok
}
