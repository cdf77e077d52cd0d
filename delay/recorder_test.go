package delay

import (
	"sync/atomic"
	"time"

	"github.com/tierset/tierset/internal/measure"
)

// obsOf turns an implementation of observer (a test type that embeds
// NopObserver and overrides some methods) into an Observer.
func obsOf(o observer) Observer {
	return Observer{OnEnqueue: o.OnEnqueue, OnDelivered: o.OnDelivered, OnAck: o.OnAck, OnRetry: o.OnRetry,
		OnDead: o.OnDead, OnSweep: o.OnSweep, OnError: o.OnError, OnLoss: o.OnLoss, OnWarning: o.OnWarning,
		OnHandled: o.OnHandled, OnHighWater: o.OnHighWater}
}

// NopObserver ignores every event. It is the default Observer.
type NopObserver struct{}

func (NopObserver) OnEnqueue(string, bool)                        {}
func (NopObserver) OnDelivered(string, time.Duration)             {}
func (NopObserver) OnAck(string)                                  {}
func (NopObserver) OnRetry(string, int, time.Duration)            {}
func (NopObserver) OnDead(string, int)                            {}
func (NopObserver) OnSweep(string, int, int)                      {}
func (NopObserver) OnError(string, string, error)                 {}
func (NopObserver) OnLoss(string, error, int)                     {}
func (NopObserver) OnWarning(string, error)                       {}
func (NopObserver) OnHandled(string, time.Duration, HandleResult) {}
func (NopObserver) OnHighWater(string, int, int)                  {}

// Recorder is a ready-made Observer: obsOf(atomic) counters plus a lateness
// Histogram. Its zero value is ready.
type Recorder struct {
	Enqueued, Duplicates, Delivered, Acked, Retries, Dead, Swept, Errors atomic.Int64
	// Losses sums OnLoss's n; Warnings counts OnWarning calls.
	Losses, Warnings atomic.Int64
	// HighWater is the largest perMs OnHighWater reported.
	HighWater atomic.Int64
	Lateness  measure.Histogram
	// HandledOK counts handler calls that returned nil, HandledOther the
	// others; HandleTime is their durations.
	HandledOK, HandledOther atomic.Int64
	HandleTime              measure.Histogram
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
func (r *Recorder) OnHandled(_ string, took time.Duration, res HandleResult) {
	if res == HandleOK {
		r.HandledOK.Add(1)
	} else {
		r.HandledOther.Add(1)
	}
	r.HandleTime.Record(took)
}
func (r *Recorder) OnHighWater(_ string, perMs, _ int) {
	for {
		cur := r.HighWater.Load()
		if int64(perMs) <= cur || r.HighWater.CompareAndSwap(cur, int64(perMs)) {
			return
		}
	}
}

// Observer returns the Observer that records into r.
func (r *Recorder) Observer() Observer { return obsOf(r) }
