package delay

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Tick is one tick of a periodic job, as [Queue.EnqueueTick] takes it and
// gives it back with the outcome filled in. Package periodic builds and
// reads it; its doc and docs/design.md ("Periodic jobs") say what the
// fields are for. The task a tick makes has Key as its business key and
// the tick's Unix ms (decimal) as its token, and is due at Time.
type Tick struct {
	// Key is the job's name (the task's business key); Payload the task's.
	Key     string
	Payload []byte
	// Time is the tick (rounded up to the ms); Next the tick after it by
	// the caller's schedule, kept for operators.
	Time, Next time.Time
	// State is the key of the job's state hash. It must share the queue's
	// hash tag.
	State string
	// Process is the caller's ID and Def its definition (a digest of its
	// schedule): only a caller whose declaration of Def is live in State,
	// and whose Def is the job's winner, moves the guard.
	Process, Def string
	// Skip moves the guard past Time without a task (a missed tick the
	// caller's catch-up policy drops).
	Skip bool

	// Set by EnqueueTick: Outcome is "enqueued" or "duplicate" (Task is
	// the tick's task), "skipped", "paused" (the guard moved, no task),
	// "stale" (the guard is at or past Time: another call handled it),
	// "early" (Redis TIME is before Time), "undeclared" (no live
	// declaration of Def by Process) or "other" (Winner, another
	// definition, drives the job). Last is the guard after the call
	// (zero: none), Prev the guard before it (so the one call that moved
	// the guard knows the ticks it passed over), Now the call's Redis TIME.
	Outcome string
	Task    Enqueued
	Last    time.Time
	Prev    time.Time
	Now     time.Time
	Winner  string
}

// Outcomes of enqueue_tick.lua (T_* there), by number.
var tickOutcomes = [...]string{"", "skipped", "paused", "stale", "early", "undeclared", "other"}

// EnqueueTick runs one tick of a periodic job: atomically, the job's
// guard (the last tick handled) is checked and moved with the enqueue, so
// a tick makes at most one task ever, even when a lagging process asks
// again after that task was acked and forgotten. The tick is judged by
// Redis TIME: a tick still in the future is refused ("early"). A refused
// input is a *ValidationError and nothing is sent.
func (q *Queue) EnqueueTick(ctx context.Context, t Tick) (Tick, error) {
	if t.Time.IsZero() {
		return t, invalid("tick", "zero time")
	}
	if t.State == "" || t.Process == "" || t.Def == "" {
		return t, invalid("tick", "state, process and definition are required")
	}
	ms := ceilUnixMs(t.Time)
	j := Job{Key: t.Key, Token: strconv.FormatInt(ms, 10), Payload: t.Payload, When: At(time.UnixMilli(ms))}
	mode, v, err := q.checkJob(j)
	if err != nil {
		return t, err
	}
	keys := append(q.enqueueKeys(), t.State)
	if err := checkSlot("enqueue tick", keys); err != nil {
		return t, err
	}
	skip := "0"
	if t.Skip {
		skip = "1"
	}
	var next int64
	if !t.Next.IsZero() {
		next = ceilUnixMs(t.Next)
	}
	dg := digest(j.Key)
	sent := q.o.Now()
	var r, inner reply
	for repaired := false; ; repaired = true {
		r, err = q.mutate(ctx, scriptEnqueueTick, "enqueue tick", q.req.next(), keys,
			j.Key, dg, j.Token, freshRecord(dg, j.Key, j.Token, j.Payload), q.whenArg(mode, v),
			q.epoch, q.mult, q.o.Codec.MaxMs(), maxTasksPerKey, ms, t.Process, t.Def, skip, next)
		if err != nil {
			return t, err
		}
		inner = nil
		if a, ok := r.at(5).([]any); ok {
			inner = a
		}
		if c := inner.int(0); inner == nil || repaired || (c != codeCtrLost && c != codeIdxLost) {
			break
		}
		if _, err := q.Repair(ctx); err != nil {
			return t, err
		}
	}
	out, now := r.int(0), r.int(2)
	q.observeTime(now, sent, q.o.Now())
	t.Now = time.UnixMilli(now)
	t.Last = time.Time{}
	if last := r.int(1); last > 0 {
		t.Last = time.UnixMilli(last)
	}
	t.Winner = r.str(3)
	t.Prev = time.Time{}
	if prev := r.int(4); prev > 0 {
		t.Prev = time.UnixMilli(prev)
	}
	if out != 0 {
		if out < 0 || out >= int64(len(tickOutcomes)) {
			return t, fmt.Errorf("delay: enqueue tick %q: %w: unknown outcome %d", t.Key, ErrCorrupt, out)
		}
		t.Outcome = tickOutcomes[out]
		return t, nil
	}
	// enqueue.lua's reply, as enqueueOne reads it
	var e Enqueued
	switch inner.int(0) {
	case codeOK:
		e, err = q.enqueued(j, reply{inner.int(0), inner.str(1), "", inner.str(2)}, 0)
		if err == nil {
			q.noteSeq(now, e.Seq)
		}
	case codeDup, codeRestored:
		e, err = q.enqueued(j, inner, 0)
	default:
		e, err = q.enqueued(j, reply{inner.int(0), "", "", ""}, 0)
	}
	if err != nil {
		return t, err
	}
	t.Task = e
	t.Outcome = "enqueued"
	if e.Duplicate {
		t.Outcome = "duplicate"
	}
	return t, nil
}
