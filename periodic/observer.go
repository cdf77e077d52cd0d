package periodic

import (
	"time"

	"github.com/tierset/tierset/delay"
)

// Observer receives the ticks a Scheduler handled; a nil field is not
// called. A tick is reported only by the process whose call moved the
// job's guard past it (one per tick, judged in Redis), so the counts of
// every process add up to the job's, without double counting. The
// calls are made from Run's goroutine and must not block.
type Observer struct {
	// OnEnqueued: a tick of job made its task (or found it, enqueued
	// by hand under the job's name and the tick's token).
	OnEnqueued func(queue, job string)
	// OnMissed: n ticks of job passed without a task, for reason
	// "catchup" (dropped by the job's CatchUp after every process or
	// Redis was down, or the job undeclared) or "paused" (Pause).
	OnMissed func(queue, job, reason string, n int)
}

// count reports a tick this process's call handled: its own fate and
// the ticks the guard passed over to reach it (catch-up dropped them
// without a call). Prev, the guard before the call, comes from the
// script, so the count is right however far behind this process was.
func (r *runner) count(e *entry, t delay.Tick) {
	o := r.s.o.Observer
	var own string
	switch t.Outcome {
	case "enqueued", "duplicate":
	case "skipped":
		own = "catchup"
	case "paused":
		own = "paused"
	default:
		return // the call moved nothing
	}
	over := 0
	if !t.Prev.IsZero() {
		over = ticksBetween(e.job.Schedule, t.Prev, t.Time)
	}
	q, job := r.s.q.Name(), e.job.Name
	if over > 0 && o.OnMissed != nil {
		reason := "catchup"
		if own == "paused" {
			reason = "paused"
		}
		o.OnMissed(q, job, reason, over)
	}
	switch {
	case own == "" && o.OnEnqueued != nil:
		o.OnEnqueued(q, job)
	case own != "" && o.OnMissed != nil:
		o.OnMissed(q, job, own, 1)
	}
}

// ticksBetween counts the ticks of sc strictly between a and b: exact up
// to maxWalk of them, then estimated from the last gap.
func ticksBetween(sc Schedule, a, b time.Time) int {
	n := 0
	for t := sc.Next(a); t.After(a) && t.Before(b); t = sc.Next(t) {
		if n++; n == maxWalk {
			gap := sc.Next(t).Sub(t)
			if gap > 0 {
				n += int((b.Sub(t) - 1) / gap)
			}
			break
		}
		a = t
	}
	return n
}
