package delay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/soak"
	"github.com/tierset/tierset/internal/testredis"
)

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitProgress polls cond until it reports done, failing when its count
// has not moved for stall: a test of what happens, not of how fast.
func waitProgress(t *testing.T, stall time.Duration, what string, cond func() (count int64, done bool)) {
	t.Helper()
	last, moved := int64(-1), time.Now()
	for {
		n, done := cond()
		if done {
			return
		}
		if n != last {
			last, moved = n, time.Now()
		} else if time.Since(moved) > stall {
			t.Fatalf("timed out waiting for %s: stuck at %d for %v", what, n, stall)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Due by Redis TIME, with a skewed client clock: delivery still follows
// Redis TIME.
func TestWorkerClockSkew(t *testing.T) {
	t.Parallel()
	for _, skew := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(fmt.Sprintf("skew=%v", skew), func(t *testing.T) {
			testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
				rec := &Recorder{}
				// a 30 s lease outlasts any stall of a loaded machine, so each
				// task is delivered once; a skew leaked into the lease would
				// still show (-1 h: every lease already over, tasks delivered
				// again and again)
				q := newQ(t, b, Options{Lease: 30 * time.Second, Observer: obsOf(rec),
					Now: func() time.Time { return time.Now().Add(skew) }})
				var mu sync.Mutex
				got := map[string]time.Duration{}
				w, err := newWorker(q, func(ctx context.Context, tk *Task) error {
					mu.Lock()
					got[tk.Key] = tk.Lateness()
					mu.Unlock()
					return nil
				}, workerOpts{Concurrency: 4})
				if err != nil {
					t.Fatal(err)
				}
				stop := runFunc(t, w.Run)
				const n = 20
				for i := range n {
					mustEnqueue(t, ctx, q, Job{Key: fmt.Sprintf("k%d", i), When: After(time.Duration(100+10*i) * time.Millisecond)})
				}
				// a skew leaked into the worker's timer would hold them an
				// hour; the server-side lateness below bounds each task
				waitFor(t, time.Minute, "deliveries (a leaked skew holds them an hour)", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == n })
				if err := stop(); !errors.Is(err, context.Canceled) {
					t.Fatalf("Run = %v", err)
				}
				mu.Lock()
				defer mu.Unlock()
				for k, l := range got {
					// delivered by the server clock, never early, not an hour
					// late (a loaded machine makes it seconds, never an hour)
					if l < 0 || l > time.Minute {
						t.Errorf("%s lateness %v", k, l)
					}
				}
				if rec.Lateness.Early() != 0 || rec.Lateness.Count() != n {
					t.Errorf("histogram early=%d count=%d", rec.Lateness.Early(), rec.Lateness.Count())
				}
				t.Logf("lateness p50=%v p99=%v max=%v (skew %v)", rec.Lateness.Percentile(50), rec.Lateness.Percentile(99), rec.Lateness.Max(), skew)
			})
		})
	}
}

// Handler errors retry with backoff, panics retry, Permanent dead-letters.
func TestWorkerOutcomes(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		rec := &Recorder{}
		// the lease (30 s) outlasts any stall, so every attempt counted
		// below is a handler outcome, never an expired lease
		q := newQ(t, b, Options{Lease: 30 * time.Second, MaxAttempts: 3, Observer: obsOf(rec),
			Backoff: func(int) time.Duration { return 5 * time.Millisecond }})
		var calls sync.Map
		w, _ := newWorker(q, func(ctx context.Context, tk *Task) error {
			v, _ := calls.LoadOrStore(tk.Key, new(atomic.Int32))
			n := v.(*atomic.Int32).Add(1)
			switch tk.Key {
			case "flaky":
				if n < 3 {
					return errors.New("try again")
				}
			case "panics":
				if n == 1 {
					panic("boom")
				}
			case "permanent":
				return Permanent(errors.New("invalid order"))
			case "always":
				return errors.New("nope")
			}
			return nil
		}, workerOpts{Concurrency: 2})
		stop := runFunc(t, w.Run)
		for _, k := range []string{"ok", "flaky", "panics", "permanent", "always"} {
			mustEnqueue(t, ctx, q, Job{Key: k})
		}
		waitFor(t, 60*time.Second, "outcomes", func() bool {
			st, err := q.Stats(ctx)
			return err == nil && st.Acked == 3 && st.Dead == 2
		})
		_ = stop()
		count := func(k string) int32 { v, _ := calls.Load(k); return v.(*atomic.Int32).Load() }
		if count("flaky") != 3 || count("panics") != 2 || count("permanent") != 1 || count("always") != 3 {
			t.Fatalf("calls flaky=%d panics=%d permanent=%d always=%d", count("flaky"), count("panics"), count("permanent"), count("always"))
		}
		p, _ := listDead(ctx, q, 0, 10)
		errs := map[string]string{}
		for _, d := range p.Tasks {
			errs[d.Key] = d.LastError
		}
		if errs["permanent"] != "invalid order" || errs["always"] != "nope" {
			t.Fatalf("dead errors %v", errs)
		}
	})
}

// Graceful shutdown: running handlers finish; a handler past the timeout is
// left to its lease and comes back later.
func TestWorkerShutdown(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		// 2 s: the release after ShutdownTimeout must land within the
		// lease even on a loaded machine
		q := newQ(t, b, Options{Lease: 2 * time.Second})
		started := make(chan string, 2)
		var finished atomic.Int32
		w, _ := newWorker(q, func(hctx context.Context, tk *Task) error {
			started <- tk.Key
			d := 100 * time.Millisecond
			if tk.Key == "slow" {
				d = 10 * time.Second
			}
			select {
			case <-time.After(d):
				finished.Add(1)
				return nil
			case <-hctx.Done():
				return hctx.Err()
			}
		}, workerOpts{Concurrency: 2, ShutdownTimeout: 200 * time.Millisecond})
		stop := runFunc(t, w.Run)
		mustEnqueue(t, ctx, q, Job{Key: "quick"})
		mustEnqueue(t, ctx, q, Job{Key: "slow"})
		<-started
		<-started
		err := stop()
		if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrShutdownTimeout) {
			t.Fatalf("Run = %v", err)
		}
		if finished.Load() != 1 {
			t.Fatalf("finished %d, want the quick one", finished.Load())
		}
		// The slow handler returned its ctx's error when ShutdownTimeout
		// cancelled it: interrupted, not failed, so it is released back to
		// due with its attempt not counted (directly: Run has returned).
		waitFor(t, 5*time.Second, "the slow task released", func() bool {
			infos, _ := lookup(ctx, q, "slow")
			return len(infos) == 1 && infos[0].State == StatePending
		})
		infos, _ := lookup(ctx, q, "slow")
		if infos[0].Attempt != 0 {
			t.Fatalf("slow task %+v: want attempt 0", infos)
		}
	})
}

// idleWatch is a go-redis hook that closes ch once a script call has
// returned and a BLPOP has started on the client: a worker started after
// that hook took (and found nothing due) and is waiting on its wake list.
type idleWatch struct {
	mu          sync.Mutex
	took, block bool
	ch          chan struct{}
}

func watchIdle(c redis.UniversalClient) *idleWatch {
	h := &idleWatch{ch: make(chan struct{})}
	c.AddHook(h)
	return h
}

func (h *idleWatch) see(took, block bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	was := h.took && h.block
	h.took, h.block = h.took || took, h.block || block
	if !was && h.took && h.block {
		close(h.ch)
	}
}

func (h *idleWatch) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *idleWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name := cmd.Name()
		if name == "blpop" {
			h.see(false, true)
		}
		err := next(ctx, cmd)
		if strings.HasPrefix(name, "eval") {
			h.see(true, false)
		}
		return err
	}
}

func (h *idleWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// An earlier task enqueued while the worker sleeps for a later one wakes it.
func TestWorkerWakeEarlier(t *testing.T) {
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		got := make(chan *Task, 2)
		w, _ := newWorker(q, func(ctx context.Context, tk *Task) error { got <- tk; return nil }, workerOpts{IdleCheck: time.Minute})
		mustEnqueue(t, ctx, q, Job{Key: "later", When: After(time.Hour)})
		idle := watchIdle(b.Client)
		runFunc(t, w.Run)
		select { // the worker took, found only "later", and waits on its wake list
		case <-idle.ch:
		case <-time.After(5 * time.Second):
			t.Fatal("the worker never took and waited on its wake list")
		}
		mustEnqueue(t, ctx, q, Job{Key: "soon", When: After(100 * time.Millisecond)})
		select {
		case tk := <-got:
			if tk.Key != "soon" || tk.Lateness() < 0 || tk.Lateness() > time.Second {
				t.Fatalf("got %s lateness %v", tk.Key, tk.Lateness())
			}
		case <-time.After(3 * time.Second):
			t.Fatal("worker not woken for the earlier task")
		}
	})
}

// AutoExtend keeps a handler longer than the lease from being redelivered.
func TestWorkerAutoExtend(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		lease := soak.Pick(2*time.Second, time.Second)
		q := newQ(t, b, Options{Lease: lease})
		var calls atomic.Int32
		w, _ := newWorker(q, func(ctx context.Context, tk *Task) error {
			calls.Add(1)
			// hold the task until its lease was extended past two leases
			// from its first deadline (events, not a sleep longer than the
			// lease that a loaded machine could stretch past an extension)
			first := tk.Deadline
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
				ms, err := b.Client.ZScore(ctx, q.k.inflight, tk.ID).Result()
				if err == nil && time.UnixMilli(int64(ms)).After(first.Add(2*lease)) {
					return nil
				}
				time.Sleep(20 * time.Millisecond)
			}
			return errors.New("lease never extended past two leases")
		}, workerOpts{Concurrency: 2, AutoExtend: true})
		stop := runFunc(t, w.Run)
		mustEnqueue(t, ctx, q, Job{Key: "long"})
		waitFor(t, 30*time.Second, "ack", func() bool { st, _ := q.Stats(ctx); return st.Acked == 1 })
		_ = stop()
		if calls.Load() != 1 {
			t.Fatalf("handler ran %d times", calls.Load())
		}
	})
}

// closedYet reports, without blocking, whether ch is closed: a waitFor
// condition for an event signalled by closing a channel.
func closedYet(ch <-chan struct{}) func() bool {
	return func() bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
}
