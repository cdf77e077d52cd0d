package delay

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/testredis"
)

// A worker whose ctx ends by deadline while its take's reply is on the
// way (held in the proxy: the take ran on the server) releases that
// take's tasks before Run returns: they are due again at once, their
// attempt not counted, so with MaxAttempts 1 they still run.
func TestFaultDeadlineReleasesTake(t *testing.T) {
	t.Parallel()
	env := newFaultEnv(t)
	ctx := testCtx(t)
	loadScripts(t, ctx, env.direct)
	q, err := New(env.c, "deadline", Options{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	fillDue(t, ctx, q, n)
	var started sync.WaitGroup // stays at zero: no handler may start
	w, err := newWorker(q, func(ctx context.Context, tk *Task) error {
		t.Errorf("handler started task %s", tk.ID)
		return nil
	}, workerOpts{Concurrency: n, Heartbeat: -1, WakeClient: env.direct})
	if err != nil {
		t.Fatal(err)
	}
	hold := env.proxy.HoldNext(faultproxy.Contains(scriptTake.Hash()))
	rctx, cancel := context.WithTimeout(ctx, 750*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(rctx) }()
	waitFor(t, 10*time.Second, "the first take's reply held", closedYet(hold.Held()))
	if rctx.Err() != nil {
		t.Fatal("the deadline passed before the take went out: nothing tested")
	}
	var runErr error
	select {
	case runErr = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return within 20 s of its deadline")
	}
	started.Wait()
	if !errors.Is(runErr, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want the deadline", runErr)
	}
	if st := mustStats(t, ctx, q); st.InFlight != 0 || st.Pending != n {
		t.Fatalf("after Run returned: %d in flight, %d pending; want 0 and %d (the take released)", st.InFlight, st.Pending, n)
	}
	b := mustTake(t, ctx, q, n)
	if len(b.Tasks) != n {
		t.Fatalf("took %d tasks, want %d", len(b.Tasks), n)
	}
	for _, tk := range b.Tasks {
		if tk.Attempt != 1 {
			t.Errorf("task %s: attempt %d, want 1 (the stranded take not counted)", tk.ID, tk.Attempt)
		}
	}
}

// Run returns within ShutdownTimeout of its ctx's end (not a WakeBlock
// later, waiting for its wake BLPOP), with ErrShutdownTimeout exactly
// when a handler outlived it.
func TestPoolShutdownWithinTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, tc := range []struct {
		name string
		work time.Duration // the handler's run, ignoring its ctx; 0: no task
	}{
		{"handler outlives the timeout", 700 * time.Millisecond},
		{"idle", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := testredis.Redis(t)
			ctx := testCtx(t)
			q := newQ(t, b, Options{})
			begun := make(chan struct{})
			var handlers sync.WaitGroup
			handlers.Add(1)
			w, err := newWorker(q, func(ctx context.Context, tk *Task) error {
				defer handlers.Done()
				close(begun)
				time.Sleep(tc.work)
				return nil
			}, workerOpts{ShutdownTimeout: timeout, WakeBlock: 3 * time.Second, Heartbeat: -1})
			if err != nil {
				t.Fatal(err)
			}
			stop := runFunc(t, w.Run)
			waitFor(t, 10*time.Second, "the worker up", func() bool { return w.Stats()[0].Up == 1 })
			if tc.work > 0 {
				mustEnqueue(t, ctx, q, Job{Key: "slow"})
				select {
				case <-begun:
				case <-time.After(10 * time.Second):
					t.Fatal("the handler did not start")
				}
			} else {
				handlers.Done()
			}
			from := time.Now()
			err = stop()
			took := time.Since(from)
			handlers.Wait() // its ack goes out before the test's client closes
			t.Logf("Run returned %v after its ctx ended: %v", took.Round(time.Millisecond), err)
			if took > timeout+250*time.Millisecond {
				t.Errorf("Run took %v after its ctx ended, want ≤ ShutdownTimeout %v (+250 ms)", took, timeout)
			}
			if got, want := errors.Is(err, ErrShutdownTimeout), tc.work > timeout; got != want {
				t.Errorf("Run = %v: ErrShutdownTimeout %v, want %v", err, got, want)
			}
		})
	}
}

// With prefetch (Concurrency 2, BatchSize 200, a 25 ms handler), Pause
// stops the worker within 100 ms: the tasks it holds unstarted go back
// to due, their attempt not counted, and no handler starts later.
func TestPauseStopsPrefetched(t *testing.T) {
	b := testredis.Redis(t)
	ctx := testCtx(t)
	q := newQ(t, b, Options{})
	const n = 600
	fillDue(t, ctx, q, n)
	var mu sync.Mutex
	var starts []time.Time
	w, err := newWorker(q, func(ctx context.Context, tk *Task) error {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		time.Sleep(25 * time.Millisecond)
		return nil
	}, workerOpts{Concurrency: 2, BatchSize: 200, Heartbeat: -1})
	if err != nil {
		t.Fatal(err)
	}
	stop := runFunc(t, w.Run)
	waitFor(t, 10*time.Second, "10 starts", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(starts) >= 10
	})
	if err := q.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	waitFor(t, 10*time.Second, "nothing in flight", func() bool { return mustStats(t, ctx, q).InFlight == 0 })
	mu.Lock()
	last, handled := starts[len(starts)-1], len(starts)
	mu.Unlock()
	after := last.Sub(paused)
	t.Logf("%d starts; the last %v after Pause returned", handled, after.Round(time.Millisecond))
	if after > 100*time.Millisecond {
		t.Errorf("a handler started %v after Pause returned, want ≤ 100 ms", after)
	}
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	if err := q.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	left := 0
	for {
		bt := mustTake(t, ctx, q, MaxBatch)
		if len(bt.Tasks) == 0 {
			break
		}
		for _, tk := range bt.Tasks {
			left++
			if tk.Attempt != 1 {
				t.Errorf("task %s: attempt %d, want 1 (a prefetched task released, not counted)", tk.ID, tk.Attempt)
			}
		}
	}
	if handled+left != n {
		t.Errorf("%d handled + %d left = %d, want %d", handled, left, handled+left, n)
	}
}

// A cancel (not a deadline) while a take's reply is late: go-redis ends a
// read at a deadline only, so the take's reply held in the proxy (a slow
// link), or the whole server frozen, used to hold Run for seconds past
// ShutdownTimeout, which then reported ErrShutdownTimeout with no handler
// running. Run returns within ShutdownTimeout of the cancel, without
// ErrShutdownTimeout, and the take's tasks are due again, attempt 1: at
// once when the server answers, after it thaws when frozen.
func TestFaultCancelDuringTake(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, tc := range []struct {
		name   string
		freeze bool
	}{
		{"reply held", false},
		{"server frozen", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newFaultEnv(t)
			ctx := testCtx(t)
			loadScripts(t, ctx, env.direct)
			q, err := New(env.c, "cancel", Options{MaxAttempts: 1})
			if err != nil {
				t.Fatal(err)
			}
			const n = 5
			fillDue(t, ctx, q, n)
			w, err := newWorker(q, func(ctx context.Context, tk *Task) error {
				t.Errorf("handler started task %s", tk.ID)
				return nil
			}, workerOpts{Concurrency: n, ShutdownTimeout: timeout, Heartbeat: -1, WakeClient: env.direct})
			if err != nil {
				t.Fatal(err)
			}
			hold := env.proxy.HoldNext(faultproxy.Contains(scriptTake.Hash()))
			t.Cleanup(hold.Release)
			stop := runFunc(t, w.Run)
			waitFor(t, 10*time.Second, "the first take's reply held", closedYet(hold.Held()))
			if tc.freeze {
				env.srv.Freeze()
				t.Cleanup(env.srv.Thaw)
			}
			from := time.Now()
			err = stop()
			took := time.Since(from)
			t.Logf("Run returned %v after the cancel: %v", took.Round(time.Millisecond), err)
			if took > timeout+250*time.Millisecond {
				t.Errorf("Run took %v after the cancel, want ≤ ShutdownTimeout %v (+250 ms)", took, timeout)
			}
			if !errors.Is(err, context.Canceled) || errors.Is(err, ErrShutdownTimeout) {
				t.Errorf("Run = %v, want context.Canceled alone (no handler ran)", err)
			}
			if tc.freeze {
				env.srv.Thaw()
			}
			waitFor(t, 5*time.Second, "the take's tasks due again", func() bool {
				st, err := q.Stats(ctx)
				return err == nil && st.InFlight == 0 && st.Pending == n
			})
			b := mustTake(t, ctx, q, n)
			if len(b.Tasks) != n {
				t.Fatalf("took %d tasks, want %d", len(b.Tasks), n)
			}
			for _, tk := range b.Tasks {
				if tk.Attempt != 1 {
					t.Errorf("task %s: attempt %d, want 1 (the stranded take not counted)", tk.ID, tk.Attempt)
				}
			}
		})
	}
}

// A take that ran before a Pause but whose reply comes late (held in the
// proxy: a slow link) used to hand its tasks to the free handlers on
// arrival, 150 ms after Pause returned. The taker now asks Redis once
// after a take answered pauseStale or more after it was sent: none
// starts, and the tasks are due again, attempt 1.
func TestFaultPauseDuringSlowTake(t *testing.T) {
	t.Parallel()
	env := newFaultEnv(t)
	ctx := testCtx(t)
	loadScripts(t, ctx, env.direct)
	q, err := New(env.c, "slowpause", Options{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	fillDue(t, ctx, q, n)
	var started atomic.Int64
	w, err := newWorker(q, func(ctx context.Context, tk *Task) error {
		started.Add(1)
		return nil
	}, workerOpts{Concurrency: n, Heartbeat: -1, WakeClient: env.direct})
	if err != nil {
		t.Fatal(err)
	}
	hold := env.proxy.HoldNext(faultproxy.Contains(scriptTake.Hash()))
	t.Cleanup(hold.Release)
	stop := runFunc(t, w.Run)
	waitFor(t, 10*time.Second, "the first take's reply held", closedYet(hold.Held()))
	direct, err := New(env.direct, "slowpause", q.Options())
	if err != nil {
		t.Fatal(err)
	}
	if err := direct.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond) // the link's delay
	hold.Release()
	waitFor(t, 5*time.Second, "the late take's tasks due again", func() bool {
		st, err := direct.Stats(ctx)
		return err == nil && st.InFlight == 0 && st.Pending == n
	})
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	if got := started.Load(); got != 0 {
		t.Fatalf("%d handlers started after the pause", got)
	}
	if err := direct.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tk := range mustTake(t, ctx, direct, n).Tasks {
		if tk.Attempt != 1 {
			t.Errorf("task %s: attempt %d, want 1", tk.ID, tk.Attempt)
		}
	}
}
