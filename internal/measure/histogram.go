package measure

import (
	"math/bits"
	"sync"
	"time"
)

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
