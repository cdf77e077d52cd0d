// Package delayraw reaches the lease calls of package delay that a Pool
// runs on its own and that delay does not export: take, ack, retry, kill
// and extend, one call each. The bench commands measure them alone (round
// trips and server cost per call), and tests of other packages use them
// to put a task in flight, retried or dead with a given error. Programs
// use a delay.Pool.
//
// Each function is linked to its counterpart in delay (delay/raw.go).
// Retry, RetryAfter and Kill return what they did: "retried", "dead" or
// "cancelled".
package delayraw

import (
	"context"
	"time"
	_ "unsafe" // go:linkname

	"github.com/tierset/tierset/delay"
)

// Take takes at most n (1..delay.MaxBatch) tasks due by Redis TIME, each
// under a fresh lease of the queue's Options.Lease. One round trip.
//
//go:linkname Take github.com/tierset/tierset/delay.rawTake
func Take(ctx context.Context, q *delay.Queue, n int) ([]*delay.Task, error)

// Ack completes tasks, delay.MaxBatch per script; errs[i] is the outcome
// of tasks[i], err a transport error (then errs is nil).
//
//go:linkname Ack github.com/tierset/tierset/delay.rawAck
func Ack(ctx context.Context, q *delay.Queue, tasks []*delay.Task) (errs []error, err error)

// Retry gives t back with the delay Options.Backoff(t.Attempt), or
// dead-letters it at Options.MaxAttempts; cause is kept as its last error.
//
//go:linkname Retry github.com/tierset/tierset/delay.rawRetry
func Retry(ctx context.Context, q *delay.Queue, t *delay.Task, cause error) (string, error)

// RetryAfter is Retry with an explicit delay.
//
//go:linkname RetryAfter github.com/tierset/tierset/delay.rawRetryAfter
func RetryAfter(ctx context.Context, q *delay.Queue, t *delay.Task, d time.Duration, cause error) (string, error)

// Kill dead-letters t now, keeping cause as its last error.
//
//go:linkname Kill github.com/tierset/tierset/delay.rawKill
func Kill(ctx context.Context, q *delay.Queue, t *delay.Task, cause error) (string, error)

// Extend sets t's lease deadline to Redis TIME + lease and returns it.
//
//go:linkname Extend github.com/tierset/tierset/delay.rawExtend
func Extend(ctx context.Context, q *delay.Queue, t *delay.Task, lease time.Duration) (time.Time, error)
