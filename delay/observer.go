package delay

import "time"

// Observer receives queue and worker events: each field that is set is
// called for its event, a nil field ignores it, so the zero Observer (the
// default) ignores every event. The funcs must be safe for concurrent use
// and fast: they run on the hot path. Whatever the Observer, the events
// that mean something is wrong (OnError, OnLoss, OnWarning) are also
// logged through Options.Logger.
type Observer struct {
	// OnEnqueue: a task was written (duplicate=false) or already existed.
	OnEnqueue func(queue string, duplicate bool)
	// OnDelivered: a task was taken; lateness is Redis TIME at take minus
	// its due time (both server clock).
	OnDelivered func(queue string, lateness time.Duration)
	// OnAck: a task completed.
	OnAck func(queue string)
	// OnRetry: a task went back to due with delay after its attempt-th
	// delivery.
	OnRetry func(queue string, attempt int, delay time.Duration)
	// OnDead: a task was dead-lettered after attempt deliveries.
	OnDead func(queue string, attempt int)
	// OnSweep: a sweep returned expired leases to due and dead-lettered
	// others.
	OnSweep func(queue string, returned, dead int)
	// OnError: an operation failed (op names it, e.g. "take", "ack").
	OnError func(queue string, op string, err error)
	// OnLoss: Redis lost part of the queue's state and the queue met it.
	// err wraps ErrCounterLost or ErrIndexLost (repaired), ErrRecordLost
	// (n task IDs without a record, moved to the dead set) or ErrDueLost
	// (n records in no set: put back in due, or found by Repair).
	OnLoss func(queue string, err error, n int)
	// OnWarning: a server or client setting puts the queue's data or
	// deadlines at risk, or could not be read (err wraps
	// ErrEvictionPolicy, ErrConfigUnavailable, or names
	// ContextTimeoutEnabled), or a millisecond's score space is nearly
	// full (ErrHighWater).
	OnWarning func(queue string, err error)
	// OnHandled: a handler call returned (or panicked) after took; res
	// says how, and so what happens to the task next.
	OnHandled func(queue string, took time.Duration, res HandleResult)
	// OnHighWater: an enqueue of this process was given the highest seq
	// of the current minute (Redis TIME): perMs of a millisecond's space
	// (2^bits seqs) are in use. Called when that mark rises, and at the
	// first enqueue of each minute. Stats.HighWater is the queue-wide mark.
	OnHighWater func(queue string, perMs, space int)
}

// observer is what the queue and its workers call: the caller's Observer
// behind the logging of logObserver, every event a method.
type observer interface {
	OnEnqueue(queue string, duplicate bool)
	OnDelivered(queue string, lateness time.Duration)
	OnAck(queue string)
	OnRetry(queue string, attempt int, delay time.Duration)
	OnDead(queue string, attempt int)
	OnSweep(queue string, returned, dead int)
	OnError(queue string, op string, err error)
	OnLoss(queue string, err error, n int)
	OnWarning(queue string, err error)
	OnHandled(queue string, took time.Duration, res HandleResult)
	OnHighWater(queue string, perMs, space int)
}
