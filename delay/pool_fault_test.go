package delay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/testredis"
)

func (o *faultObserver) count(op string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.errs[op])
}

// A Worker and a ShardedWorker started while their Redis is down for 2 s
// keep retrying their start-up Check, report the outage, and deliver
// every task enqueued once it is back.
func TestFaultWorkerStartOutage(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{0, 4} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			t.Parallel()
			r := testredis.StartServer(t)
			c := r.Client(&redis.Options{MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
			ctx := testCtx(t)
			obs := &faultObserver{errs: map[string][]error{}}
			o := Options{Lease: 2 * time.Second, Observer: obsOf(obs)}
			var mu sync.Mutex
			got := map[string]int{}
			h := func(ctx context.Context, tk *Task) error {
				mu.Lock()
				got[tk.Key]++
				mu.Unlock()
				return nil
			}
			wo := workerOpts{Concurrency: 2, ReconnectMax: 300 * time.Millisecond, Heartbeat: -1}
			var run func(context.Context) error
			var stats func() LineStats
			var enqueue func(context.Context, Job) error
			if shards == 0 {
				q, err := New(c, "outage", o)
				if err != nil {
					t.Fatal(err)
				}
				w, err := newWorker(q, h, wo)
				if err != nil {
					t.Fatal(err)
				}
				run, stats = w.Run, func() LineStats { return w.Stats()[0] }
				enqueue = func(ctx context.Context, j Job) error { _, err := q.Enqueue(ctx, j); return err }
			} else {
				s, err := NewSharded(c, "outage", ShardedOptions{Shards: shards, Queue: o})
				if err != nil {
					t.Fatal(err)
				}
				w, err := newWorker(s, h, wo)
				if err != nil {
					t.Fatal(err)
				}
				run, stats = w.Run, func() LineStats { return w.Stats()[0] }
				enqueue = func(ctx context.Context, j Job) error { _, err := s.Enqueue(ctx, j); return err }
			}
			r.Kill()
			var returned atomic.Bool
			stop := runFunc(t, func(ctx context.Context) error {
				defer returned.Store(true)
				return run(ctx)
			})
			down := time.Now()
			waitFor(t, 10*time.Second, "the start-up Check to report the outage", func() bool { return obs.count("check") > 0 })
			// The outage lasts 2 s: the fault's length, not a synchronisation.
			time.Sleep(time.Until(down.Add(2 * time.Second)))
			if returned.Load() {
				t.Fatalf("Run returned during the outage: %v", stop())
			}
			r.Start()
			const n = 20
			for i := range n {
				j := Job{Key: fmt.Sprintf("after%d", i), Token: "t"}
				// the client may still be reconnecting: the same (key, token) again is idempotent
				waitFor(t, 10*time.Second, "enqueue after the outage", func() bool { return enqueue(ctx, j) == nil })
			}
			waitFor(t, 20*time.Second, "every task enqueued after the outage", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(got) == n
			})
			if err := stop(); !errors.Is(err, context.Canceled) || errors.Is(err, ErrShutdownTimeout) {
				t.Fatalf("Run = %v", err)
			}
			st := stats()
			t.Logf("check errors reported: %d; stats %+v", obs.count("check"), st)
			if want := max(shards, 1); st.Up != want || st.Errors == 0 {
				t.Fatalf("stats %+v: want %d queues up and the errors counted", st, want)
			}
			for k, c := range got {
				if c != 1 {
					t.Errorf("%s handled %d times", k, c)
				}
			}
		})
	}
}

// Handlers that outlive ShutdownTimeout by 0-500 ms and then return nil
// are acked (directly, the ack loop having stopped): nothing runs again.
func TestFaultShutdownAcks(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		rec := &Recorder{}
		// The default 30 s lease: on a loaded machine the 20 handlers may
		// take seconds to start, and a lease that ends before the late
		// ack would make the ack fail for a reason this test is not about.
		q := newQ(t, b, Options{Observer: obsOf(rec)})
		const n = 20
		var started, calls atomic.Int32
		w, err := newWorker(q, func(hctx context.Context, tk *Task) error {
			calls.Add(1)
			started.Add(1)
			<-hctx.Done() // cancelled at ShutdownTimeout
			time.Sleep(rand.N(500 * time.Millisecond))
			return nil
		}, workerOpts{Concurrency: n, ShutdownTimeout: 100 * time.Millisecond, Heartbeat: -1})
		if err != nil {
			t.Fatal(err)
		}
		stop := runFunc(t, w.Run)
		fillDue(t, ctx, q, n)
		waitFor(t, 10*time.Second, "every handler started", func() bool { return started.Load() == n })
		if err := stop(); !errors.Is(err, ErrShutdownTimeout) {
			t.Fatalf("Run = %v, want ErrShutdownTimeout", err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			st, err := q.Stats(ctx)
			if err == nil && st.Acked == n {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("late handlers: %d acked of %d (%v); observer errors %d, handled ok %d", st.Acked, n, err, rec.Errors.Load(), rec.HandledOK.Load())
			}
			time.Sleep(10 * time.Millisecond)
		}
		st, err := q.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// nothing in flight nor due: no lease can bring a task back
		if st.Pending != 0 || st.InFlight != 0 || st.Retries != 0 || st.Expired != 0 {
			t.Fatalf("after the late acks: %+v", st)
		}
		if calls.Load() != n || rec.HandledOK.Load() != n {
			t.Fatalf("%d calls, %d reported ok, want %d", calls.Load(), rec.HandledOK.Load(), n)
		}
	})
}

// shutdownAckObserver counts acks and records the worker's errors.
type shutdownAckObserver struct {
	faultObserver
	acks atomic.Int32
}

func (o *shutdownAckObserver) OnAck(string) { o.acks.Add(1) }

// TestFaultShutdownAckCutReply: a handler returns after ShutdownTimeout,
// and every send of its direct ack loses its reply after the ack ran. The
// next attempt is the same call, answered from the kept reply: the task
// is acked once and no error but the transport one is reported (a new
// call would find the task gone and report it not found).
func TestFaultShutdownAckCutReply(t *testing.T) {
	t.Parallel()
	env := newFaultEnv(t)
	ctx := testCtx(t)
	loadScripts(t, ctx, env.direct) // a cut EVALSHA is then one that ran
	obs := &shutdownAckObserver{faultObserver: faultObserver{errs: map[string][]error{}}}
	q, err := New(env.c, "lateack", Options{Prefix: testredis.Prefix(t), Observer: obsOf(obs)})
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	w, err := newWorker(q, func(hctx context.Context, _ *Task) error {
		close(started)
		<-hctx.Done() // cancelled at ShutdownTimeout
		<-release     // the cut is armed and Run has returned
		return nil
	}, workerOpts{Concurrency: 1, ShutdownTimeout: 100 * time.Millisecond, Heartbeat: -1})
	if err != nil {
		t.Fatal(err)
	}
	stop := runFunc(t, w.Run)
	if _, err := q.Enqueue(ctx, Job{Key: "order:1"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("handler never started")
	}
	ack := []byte(scriptAck.Hash())
	env.proxy.CutNext(4, func(req []byte) bool { return bytes.Contains(req, ack) }) // go-redis sends 4 times
	if err := stop(); !errors.Is(err, ErrShutdownTimeout) {
		t.Fatalf("Run = %v, want ErrShutdownTimeout", err)
	}
	close(release)
	for deadline := time.Now().Add(30 * time.Second); obs.acks.Load() == 0 && obs.count("ack") < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("no ack outcome in 30 s: %d cuts, ack errors %v", env.proxy.Cuts(), obs.errs["ack"])
		}
		sleepCtx(ctx, 5*time.Millisecond)
	}
	if env.proxy.Cuts() != 4 {
		t.Fatalf("%d ack replies cut, want 4", env.proxy.Cuts())
	}
	obs.mu.Lock()
	ackErrs := obs.errs["ack"]
	obs.mu.Unlock()
	if len(ackErrs) != 1 || isRedisReplyErr(ackErrs[0]) || !errors.Is(ackErrs[0], ErrRedis) || obs.acks.Load() != 1 {
		t.Fatalf("ack errors %v, %d acks: want one transport error, then the kept reply's ack", ackErrs, obs.acks.Load())
	}
	st, err := q.Stats(ctx)
	if err != nil || st.Acked != 1 || st.Pending != 0 || st.InFlight != 0 {
		t.Fatalf("stats %+v, %v: want 1 acked, nothing pending or in flight", st, err)
	}
}

// A configuration error no retry fixes (a server that may evict the
// queue's keys) ends Run at once, named with the queue.
func TestPoolEvictionPolicyStops(t *testing.T) {
	t.Parallel()
	r := testredis.StartServer(t, "--maxmemory-policy", "allkeys-lru")
	c := r.Client(nil)
	q, err := New(c, "evictable", Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := newWorker(q, func(context.Context, *Task) error { return nil }, workerOpts{Heartbeat: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = w.Run(ctx)
	if !errors.Is(err, ErrEvictionPolicy) || !strings.Contains(err.Error(), "evictable") || ctx.Err() != nil {
		t.Fatalf("Run = %v (ctx %v), want ErrEvictionPolicy naming the queue, at once", err, ctx.Err())
	}
}

// Strict: a higher line whose server is down holds no lower line back.
func TestFaultPoolStrictDownLine(t *testing.T) {
	t.Parallel()
	b := testredis.Redis(t)
	r := testredis.StartServer(t)
	dead := r.Client(&redis.Options{MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	obs := &faultObserver{errs: map[string][]error{}}
	high, err := New(dead, "high", Options{Observer: obsOf(obs)})
	if err != nil {
		t.Fatal(err)
	}
	r.Kill()
	low := namedQ(t, b, "low", Options{})
	ctx := testCtx(t)
	fillDue(t, ctx, low, 50)
	var handled atomic.Int32
	p, _ := NewPool(PoolOptions{Strict: true, Heartbeat: -1, ReconnectMax: 200 * time.Millisecond})
	if err := p.Add(high, func(context.Context, *Task) error { return nil }, QueueOptions{Weight: 9}); err != nil {
		t.Fatal(err)
	}
	if err := p.Add(low, func(context.Context, *Task) error { handled.Add(1); return nil }, QueueOptions{Weight: 1}); err != nil {
		t.Fatal(err)
	}
	stop := runFunc(t, p.Run)
	waitFor(t, 20*time.Second, "the low line served while the high one is down", func() bool { return handled.Load() == 50 })
	_ = stop()
	if obs.count("check") == 0 {
		t.Fatal("the high line's outage was not reported")
	}
	st := p.Stats()
	t.Logf("high: up %d, errors %d; low: handled %d", st[0].Up, st[0].Errors, st[1].Handled)
	if st[0].Up != 0 || st[0].Errors == 0 {
		t.Fatalf("high line stats %+v", st[0])
	}
}
