package measure

import (
	"slices"
	"sync"
	"time"
)

// Quantile is the nearest-rank q-quantile of sorted samples, 0 for none.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// Samples keeps every sample (a lateness, a latency) of a phase, so the
// percentiles are exact; safe for concurrent Add.
type Samples struct {
	mu sync.Mutex
	d  []time.Duration
}

// Add records one sample.
func (s *Samples) Add(d time.Duration) {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
}

// Summary is the distribution of a set of samples.
type Summary struct {
	N                  int
	Min, P50, P99, Max time.Duration
}

// Summary returns the distribution of the samples so far.
func (s *Samples) Summary() Summary {
	s.mu.Lock()
	d := slices.Clone(s.d)
	s.mu.Unlock()
	return Summarize(d)
}

// Summarize sorts d in place and returns its distribution.
func Summarize(d []time.Duration) Summary {
	slices.Sort(d)
	if len(d) == 0 {
		return Summary{}
	}
	return Summary{N: len(d), Min: d[0], P50: Quantile(d, 0.50), P99: Quantile(d, 0.99), Max: d[len(d)-1]}
}
