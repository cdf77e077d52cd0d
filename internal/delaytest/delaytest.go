// Package delaytest holds test helpers over delay queues that tests of
// several packages and modules share (the console's and the browser
// tests'). Package delay's own tests cannot use it: it imports delay.
package delaytest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/testrun"
)

// HandleAll enqueues a task per key on q and runs a worker (no registry
// entry) until every one is handled: the tasks of the first dead keys
// are dead-lettered with the error why, the others acked. It fails t
// when that takes longer than within, or when the worker's Run does not
// end with the cancel.
func HandleAll(t testing.TB, ctx context.Context, q *delay.Queue, keys []string, dead int, why string, within time.Duration) {
	t.Helper()
	jobs := make([]delay.Job, len(keys))
	bad := make(map[string]bool, dead)
	for i, k := range keys {
		jobs[i] = delay.Job{Key: k}
		if i < dead {
			bad[k] = true
		}
	}
	if _, err := q.EnqueueBatch(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	_, stop := StartWorker(t, ctx, q, func(_ context.Context, tk *delay.Task) error {
		if bad[tk.Key] {
			return delay.Permanent(errors.New(why))
		}
		return nil
	}, delay.PoolOptions{Heartbeat: -1})
	deadline := time.Now().Add(within)
	for {
		st, err := q.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Dead == int64(dead) && st.Pending == 0 && st.InFlight == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %s: %d tasks not handled within %v: %+v", q.Name(), len(keys), within, st)
		}
		time.Sleep(20 * time.Millisecond) // poll, with the deadline above
	}
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("worker Run = %v", err)
	}
}

// StartWorker starts a pool of o serving q alone with h, and returns it
// with a stop that cancels its Run and returns Run's error; cleanup stops
// it too, so a test that fails midway leaves no pool running.
func StartWorker(t testing.TB, ctx context.Context, q *delay.Queue, h delay.Handler, o delay.PoolOptions) (p *delay.Pool, stop func() error) {
	t.Helper()
	return startPool(t, ctx, q, h, o, delay.QueueOptions{})
}

// startPool is StartWorker with the line's options qo.
func startPool(t testing.TB, ctx context.Context, q *delay.Queue, h delay.Handler, o delay.PoolOptions, qo delay.QueueOptions) (*delay.Pool, func() error) {
	t.Helper()
	p, err := delay.NewPool(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Add(q, h, qo); err != nil {
		t.Fatal(err)
	}
	return p, testrun.Start(t, ctx, p.Run)
}

// DeadIDs is the set of the IDs of q's dead letters (the first 100).
func DeadIDs(t testing.TB, q *delay.Queue) map[string]bool {
	t.Helper()
	p, err := q.List(t.Context(), delay.ListOptions{State: delay.StateDead, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, d := range p.Tasks {
		out[d.ID] = true
	}
	return out
}

// HoldTasks starts a pool with ID id and n handlers on q, no prefetch,
// beating every 200 ms, whose handlers block: it waits (20 s at most)
// until n tasks are running and a heartbeat lists them, and returns
// their IDs sorted and a release that lets the handlers return and waits
// for a beat listing no task. Cleanup releases and stops the pool.
func HoldTasks(t testing.TB, ctx context.Context, q *delay.Queue, n int, id string) (held []string, release func()) {
	t.Helper()
	gate := make(chan struct{})
	open := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(open)
	var mu sync.Mutex
	var started []string
	h := func(_ context.Context, task *delay.Task) error {
		mu.Lock()
		started = append(started, task.ID)
		mu.Unlock()
		<-gate
		return nil
	}
	// No prefetch: the pool takes no task past its n busy handlers.
	startPool(t, ctx, q, h, delay.PoolOptions{Concurrency: n, Heartbeat: 200 * time.Millisecond, ID: id}, delay.QueueOptions{Prefetch: -1})
	lines := func(cond func(delay.LineInfo) bool) func() bool {
		return func() bool {
			ws, err := q.Workers(ctx)
			return err == nil && len(ws) == 1 && len(ws[0].Lines) == 1 && cond(ws[0].Lines[0])
		}
	}
	waitFor(t, "tasks started", func() bool { mu.Lock(); defer mu.Unlock(); return len(started) == n })
	mu.Lock()
	held = slices.Sorted(slices.Values(started))
	mu.Unlock()
	waitFor(t, "a heartbeat listing them", lines(func(l delay.LineInfo) bool { return slices.Equal(held, l.Holding[q.Name()]) }))
	return held, func() {
		t.Helper()
		open()
		waitFor(t, "a beat listing no task", lines(func(l delay.LineInfo) bool { return l.Holding == nil }))
	}
}

// waitFor polls cond every 10 ms, failing t after 20 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 20 s", what)
		}
		time.Sleep(10 * time.Millisecond) // poll, with the deadline above
	}
}
