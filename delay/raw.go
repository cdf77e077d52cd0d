package delay

import (
	"context"
	"time"
	_ "unsafe" // go:linkname
)

// The lease calls below are what a Pool runs on its own. They have no
// public API: a handler's outcome goes through its return value
// (Permanent, RetryAfter) and its lease through PoolOptions.AutoExtend.
// A few commands and tests of this repository need them alone, to
// measure one take's or one ack's round trips and server cost, or to put
// a task in flight, retried or dead with a given error; they reach them
// through internal/delayraw, which links to these functions, so that no
// one outside the repository can.

//lint:ignore U1000 reached through internal/delayraw by go:linkname
//go:linkname rawTake
func rawTake(ctx context.Context, q *Queue, n int) ([]*Task, error) {
	b, err := q.takeN(ctx, n)
	return b.Tasks, err
}

//lint:ignore U1000 reached through internal/delayraw by go:linkname
//go:linkname rawAck
func rawAck(ctx context.Context, q *Queue, tasks []*Task) ([]error, error) {
	return q.ackTasks(ctx, tasks)
}

//lint:ignore U1000 reached through internal/delayraw by go:linkname
//go:linkname rawRetry
func rawRetry(ctx context.Context, q *Queue, t *Task, cause error) (string, error) {
	out, err := q.retry(ctx, t, cause)
	return outcomeName(out), err
}

//lint:ignore U1000 reached through internal/delayraw by go:linkname
//go:linkname rawRetryAfter
func rawRetryAfter(ctx context.Context, q *Queue, t *Task, d time.Duration, cause error) (string, error) {
	out, err := q.retryAfter(ctx, t, d, cause)
	return outcomeName(out), err
}

//lint:ignore U1000 reached through internal/delayraw by go:linkname
//go:linkname rawKill
func rawKill(ctx context.Context, q *Queue, t *Task, cause error) (string, error) {
	out, err := q.killTask(ctx, t, cause)
	return outcomeName(out), err
}

//lint:ignore U1000 reached through internal/delayraw by go:linkname
//go:linkname rawExtend
func rawExtend(ctx context.Context, q *Queue, t *Task, lease time.Duration) (time.Time, error) {
	return q.extend(ctx, t, lease)
}

func outcomeName(o outcome) string {
	if o == 0 {
		return ""
	}
	return o.String()
}
