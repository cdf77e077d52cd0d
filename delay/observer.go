package delay

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// Observer receives queue and worker events. Implementations must be safe
// for concurrent use and fast (they run on the hot path). Embed NopObserver
// to implement only some methods.
type Observer interface {
	// OnEnqueue: a task was written (duplicate=false) or already existed.
	OnEnqueue(queue string, duplicate bool)
	// OnDelivered: a task was taken; lateness is Redis TIME at take minus its
	// due time (both server clock).
	OnDelivered(queue string, lateness time.Duration)
	// OnAck: a task completed.
	OnAck(queue string)
	// OnRetry: a task went back to due with delay after its attempt-th delivery.
	OnRetry(queue string, attempt int, delay time.Duration)
	// OnDead: a task was dead-lettered after attempt deliveries.
	OnDead(queue string, attempt int)
	// OnSweep: a sweep returned expired leases to due and dead-lettered others.
	OnSweep(queue string, returned, dead int)
	// OnError: an operation failed (op names it, e.g. "take", "ack").
	OnError(queue string, op string, err error)
	// OnLoss: Redis lost part of the queue's state and the queue met it.
	// err wraps ErrCounterLost or ErrIndexLost (repaired), ErrRecordLost
	// (n task IDs without a record, moved to the dead set) or ErrDueLost
	// (n records in no set: put back in due, or found by Repair).
	OnLoss(queue string, err error, n int)
	// OnWarning: a server or client setting puts the queue's data or
	// deadlines at risk, or could not be read (err wraps ErrEvictionPolicy,
	// ErrConfigUnavailable, or names ContextTimeoutEnabled), or a
	// millisecond's score space is nearly full (ErrHighWater).
	OnWarning(queue string, err error)
	// OnHighWater: an enqueue of this process was given the highest seq
	// of the current minute (Redis TIME): perMs of a millisecond's space
	// (2^bits seqs) are in use. Called when that mark rises, and at the
	// first enqueue of each minute. Stats.HighWater is the queue-wide mark.
	OnHighWater(queue string, perMs, space int)
}

// NopObserver ignores every event. It is the default Observer.
type NopObserver struct{}

func (NopObserver) OnEnqueue(string, bool)             {}
func (NopObserver) OnDelivered(string, time.Duration)  {}
func (NopObserver) OnAck(string)                       {}
func (NopObserver) OnRetry(string, int, time.Duration) {}
func (NopObserver) OnDead(string, int)                 {}
func (NopObserver) OnSweep(string, int, int)           {}
func (NopObserver) OnError(string, string, error)      {}
func (NopObserver) OnLoss(string, error, int)          {}
func (NopObserver) OnWarning(string, error)            {}
func (NopObserver) OnHighWater(string, int, int)       {}

// Recorder is a ready-made Observer: atomic counters plus a lateness
// Histogram. Its zero value is ready; benchmarks reuse it.
type Recorder struct {
	Enqueued, Duplicates, Delivered, Acked, Retries, Dead, Swept, Errors atomic.Int64
	// Losses sums OnLoss's n; Warnings counts OnWarning calls.
	Losses, Warnings atomic.Int64
	// HighWater is the largest perMs OnHighWater reported.
	HighWater atomic.Int64
	Lateness  Histogram
}

func (r *Recorder) OnEnqueue(_ string, dup bool) {
	if dup {
		r.Duplicates.Add(1)
	} else {
		r.Enqueued.Add(1)
	}
}
func (r *Recorder) OnDelivered(_ string, l time.Duration) { r.Delivered.Add(1); r.Lateness.Record(l) }
func (r *Recorder) OnAck(string)                          { r.Acked.Add(1) }
func (r *Recorder) OnRetry(string, int, time.Duration)    { r.Retries.Add(1) }
func (r *Recorder) OnDead(string, int)                    { r.Dead.Add(1) }
func (r *Recorder) OnSweep(_ string, returned, _ int)     { r.Swept.Add(int64(returned)) }
func (r *Recorder) OnError(string, string, error)         { r.Errors.Add(1) }
func (r *Recorder) OnLoss(_ string, _ error, n int)       { r.Losses.Add(int64(n)) }
func (r *Recorder) OnWarning(string, error)               { r.Warnings.Add(1) }
func (r *Recorder) OnHighWater(_ string, perMs, _ int) {
	for {
		cur := r.HighWater.Load()
		if int64(perMs) <= cur || r.HighWater.CompareAndSwap(cur, int64(perMs)) {
			return
		}
	}
}

// Histogram is a concurrency-safe log-linear histogram of durations with
// 1 µs resolution and about 3% relative error (32 sub-buckets per power of
// two). The zero value is ready. Negative samples (a delivery before its due
// time) are counted in Early and recorded as 0.
type Histogram struct {
	mu       sync.Mutex
	counts   [histBuckets]uint64
	n        uint64
	early    uint64
	sum, max time.Duration
	minSet   bool
	min      time.Duration
}

const (
	histSub     = 32
	histBuckets = histSub + 58*histSub
)

func histIndex(us uint64) int {
	if us < histSub {
		return int(us)
	}
	shift := bits.Len64(us) - 6
	return histSub + shift*histSub + int(us>>uint(shift)) - histSub
}

// histUpper is the largest µs value that falls in bucket i.
func histUpper(i int) uint64 {
	if i < histSub {
		return uint64(i)
	}
	shift := (i - histSub) / histSub
	m := uint64((i-histSub)%histSub + histSub)
	return (m+1)<<uint(shift) - 1
}

// Record adds one sample.
func (h *Histogram) Record(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if d < 0 {
		h.early++
		d = 0
	}
	h.counts[histIndex(uint64(d/time.Microsecond))]++
	h.n++
	h.sum += d
	if d > h.max {
		h.max = d
	}
	if !h.minSet || d < h.min {
		h.min, h.minSet = d, true
	}
}

// Count is the number of samples.
func (h *Histogram) Count() int64 { h.mu.Lock(); defer h.mu.Unlock(); return int64(h.n) }

// Early is the number of negative samples.
func (h *Histogram) Early() int64 { h.mu.Lock(); defer h.mu.Unlock(); return int64(h.early) }

// Max is the largest sample (exact).
func (h *Histogram) Max() time.Duration { h.mu.Lock(); defer h.mu.Unlock(); return h.max }

// Min is the smallest sample (exact).
func (h *Histogram) Min() time.Duration { h.mu.Lock(); defer h.mu.Unlock(); return h.min }

// Mean is the average sample.
func (h *Histogram) Mean() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}

// Percentile returns the sample at quantile p (0 < p ≤ 100), as the upper
// edge of its bucket capped at Max; 0 when empty.
func (h *Histogram) Percentile(p float64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		return 0
	}
	rank := uint64(p / 100 * float64(h.n))
	if rank < 1 {
		rank = 1
	}
	if rank > h.n {
		rank = h.n
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(time.Duration(histUpper(i))*time.Microsecond, h.max)
		}
	}
	return h.max
}

// Reset clears every sample.
func (h *Histogram) Reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts = [histBuckets]uint64{}
	h.n, h.early, h.sum, h.max, h.min, h.minSet = 0, 0, 0, 0, 0, false
}
