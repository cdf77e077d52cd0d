package delay

import (
	"context"
	"time"
)

// Verdict is Health's one-word reading of a queue.
type Verdict string

// Verdicts, from Health.
const (
	// VerdictIdle: no task is due.
	VerdictIdle Verdict = "idle"
	// VerdictServed: tasks are due, a live worker serves the queue, and
	// the oldest has waited less than the bound given to Health.
	VerdictServed Verdict = "served"
	// VerdictBehind: tasks are due and live workers serve the queue, but
	// the oldest has waited past the bound: the workers do not keep up.
	VerdictBehind Verdict = "behind"
	// VerdictNoWorker: tasks are due and no live worker serves the queue.
	VerdictNoWorker Verdict = "no worker"
	// VerdictPaused: tasks are due and the queue is paused (Queue.Pause),
	// so no worker takes them whether or not one is live (Health.Workers
	// says).
	VerdictPaused Verdict = "paused"
)

// Health is a queue's Stats with the live workers serving it.
type Health struct {
	Stats Stats
	// Workers are the live workers serving the queue, of every release
	// (those of the previous release too, during a rolling deploy); a
	// worker's Release says which queue controls it honours.
	Workers []WorkerInfo
	Verdict Verdict
}

// Health reads q's Stats and its live workers and tells "no live worker
// for this queue" (NoWorker) from "workers behind" (Behind: the oldest
// due task has waited more than behind; 0 means any wait), and both from
// a queue whose due tasks wait because it is paused (Paused).
func (q *Queue) Health(ctx context.Context, behind time.Duration) (Health, error) {
	if q == nil {
		return Health{}, invalid("queue", "nil *Queue")
	}
	st, err := q.Stats(ctx)
	if err != nil {
		return Health{}, err
	}
	ws, err := q.Workers(ctx)
	if err != nil {
		return Health{}, err
	}
	h := Health{Stats: st, Workers: ws}
	switch {
	case st.Ready == 0:
		h.Verdict = VerdictIdle
	case st.Paused:
		h.Verdict = VerdictPaused
	case len(ws) == 0:
		h.Verdict = VerdictNoWorker
	case st.OldestDueAge > behind:
		h.Verdict = VerdictBehind
	default:
		h.Verdict = VerdictServed
	}
	return h, nil
}
