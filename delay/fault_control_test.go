package delay

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/testredis"
)

// controlRun is a Worker draining a backlog on a private server, its
// handler recording every delivery (Redis TIME of its take).
type controlRun struct {
	q         *Queue
	mu        sync.Mutex
	delivered map[string][]int64 // task ID -> delivery times, Unix ms
	handled   atomic.Int64
	obs       *faultObserver
	stop      func() error
}

func startControlRun(t *testing.T, c redis.UniversalClient, n int, o Options) *controlRun {
	t.Helper()
	ctx := testCtx(t)
	r := &controlRun{delivered: map[string][]int64{}, obs: &faultObserver{errs: map[string][]error{}}}
	o.Prefix, o.Observer = testredis.Prefix(t), obsOf(r.obs)
	q, err := New(c, "line", o)
	if err != nil {
		t.Fatal(err)
	}
	r.q = q
	enqueueLineBacklog(t, ctx, q, n)
	return r
}

func (r *controlRun) run(t *testing.T) {
	t.Helper()
	h := func(_ context.Context, tk *Task) error {
		r.mu.Lock()
		if len(r.delivered[tk.ID]) == 0 {
			r.handled.Add(1)
		}
		r.delivered[tk.ID] = append(r.delivered[tk.ID], tk.DeliveredAt.UnixMilli())
		r.mu.Unlock()
		time.Sleep(time.Millisecond)
		return nil
	}
	w, err := newWorker(r.q, h, workerOpts{Concurrency: 8, ReconnectMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r.stop = runFunc(t, w.Run)
}

// times is every delivery time, sorted.
// checkRateWindows fails t where a window of w ms, for each of windows,
// holds more of the deliveries ds (their times in ms, sorted) than a
// limit of perSecond with burst lets through; when says when they ran.
func checkRateWindows(t *testing.T, ds []int64, perSecond, burst int64, when string, windows ...int64) {
	t.Helper()
	for _, w := range windows {
		bound := perSecond*w/1000 + burst
		worst, j := 0, 0
		for i := range ds {
			if i > 0 && ds[i] == ds[i-1] {
				continue // the window starts at the ms's first delivery
			}
			for j < len(ds) && ds[j]-ds[i] <= w {
				j++
			}
			worst = max(worst, j-i)
		}
		t.Logf("window %d ms: at most %d deliveries (bound %d)", w, worst, bound)
		if int64(worst) > bound {
			t.Errorf("window %d ms: %d deliveries%s, above the bound %d", w, worst, when, bound)
		}
	}
}

func (r *controlRun) times() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int64
	for _, ds := range r.delivered {
		out = append(out, ds...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// check: every task handled exactly once, and no worker error but the
// transport's own (the faults) and the wake-up BLPOP's.
func (r *controlRun) check(t *testing.T, n int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, ds := range r.delivered {
		if len(ds) != 1 {
			t.Errorf("task %s delivered %d times, want once", id, len(ds))
		}
	}
	if len(r.delivered) != n {
		t.Errorf("%d tasks handled, want %d", len(r.delivered), n)
	}
	r.obs.mu.Lock()
	defer r.obs.mu.Unlock()
	for op, errs := range r.obs.errs {
		for _, err := range errs {
			if op != "wake" && (!errors.Is(err, ErrRedis) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrLeaseLost)) {
				t.Errorf("worker %s: %v", op, err)
			}
		}
	}
}

func (o *faultObserver) counts() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]int{}
	for op, errs := range o.errs {
		out[op] = len(errs)
	}
	return out
}

// TestFaultPauseResumeClientKill: CLIENT KILL TYPE normal every 20 ms on a
// private server drops every connection of the Worker's client and of
// Pause and Resume's, while the test pauses and resumes the queue five
// times, with the backlog topped up so that each round pauses a busy
// worker. Each call returns success with the state it set (go-redis
// re-sends it; a re-sent call gets its first run's reply), no take after
// a pause began hands out a task, the tasks in flight are acked, and
// every task is handled exactly once.
func TestFaultPauseResumeClientKill(t *testing.T) {
	env := newFaultEnv(t)
	ctx := testCtx(t)
	c := env.srv.Client(&redis.Options{ContextTimeoutEnabled: true})
	const n = 1000
	total := n
	r := startControlRun(t, c, n, Options{})
	check, err := New(env.direct, "line", Options{Prefix: r.q.o.Prefix}) // reads state past the kills
	if err != nil {
		t.Fatal(err)
	}
	// Pause and Resume go through a client of their own that re-sends a
	// cut call up to 20 times (go-redis's default is 3): on a loaded
	// machine a kill every 20 ms can cut all four sends of one call,
	// which leaves its outcome unknown rather than wrong, and the test is
	// about what a re-send gets (the first run's reply). The worker keeps
	// the default, so its own calls fail fast and back off. Its backoff
	// stays short: go-redis re-sends the HELLO of a
	// connection killed during its handshake on that same dead
	// connection, MaxRetries times with backoff, which at the default
	// backoff cap held one Pause for 14 s.
	ctl, err := New(env.srv.Client(&redis.Options{ContextTimeoutEnabled: true, MaxRetries: 20, MaxRetryBackoff: 20 * time.Millisecond}), "line", Options{Prefix: r.q.o.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	r.run(t)
	var killed atomic.Int64
	killCtx, stopKill := context.WithCancel(ctx)
	var kwg sync.WaitGroup
	kwg.Add(1)
	go func() {
		defer kwg.Done()
		for killCtx.Err() == nil {
			if k, err := env.direct.ClientKillByFilter(killCtx, "TYPE", "normal").Result(); err == nil {
				killed.Add(k)
			}
			sleepCtx(killCtx, 20*time.Millisecond)
		}
	}()
	for round := range 5 {
		t0 := time.Now()
		from := r.handled.Load()
		// A fast worker can drain the backlog while a cut Pause is re-sent:
		// keep at least 300 tasks waiting so every round pauses a worker
		// that is busy.
		if left := total - int(r.handled.Load()); left < 300 {
			enqueueLineKeys(t, ctx, ctl, total, 500)
			total += 500
		}
		waitFor(t, 60*time.Second, "the worker handling tasks", func() bool { return r.handled.Load() >= from+50 })
		t1 := time.Now()
		if changed, err := ctl.setPaused(ctx, "1"); err != nil || !changed {
			t.Fatalf("round %d: Pause: changed %v, %v", round, changed, err)
		}
		st := mustStats(t, ctx, check)
		if !st.Paused {
			t.Fatalf("round %d: not paused after Pause", round)
		}
		since := st.PausedSince.UnixMilli()
		t2 := time.Now()
		waitFor(t, 60*time.Second, "in-flight tasks acked", func() bool { return mustStats(t, ctx, check).InFlight == 0 })
		t3 := time.Now()
		ts := r.times()
		if last := ts[len(ts)-1]; last > since {
			t.Errorf("round %d: a task taken at %d ms, after the pause began at %d ms", round, last, since)
		}
		if changed, err := ctl.setPaused(ctx, "0"); err != nil || !changed {
			t.Fatalf("round %d: Resume: changed %v, %v", round, changed, err)
		}
		if st := mustStats(t, ctx, check); st.Paused {
			t.Fatalf("round %d: paused after Resume", round)
		}
		t.Logf("round %d: 50 tasks handled in %v, pause %v, drain %v, resume %v, worker errors %v", round, t1.Sub(t0).Round(time.Millisecond), t2.Sub(t1).Round(time.Millisecond), t3.Sub(t2).Round(time.Millisecond), time.Since(t3).Round(time.Millisecond), r.obs.counts())
	}
	stopKill()
	kwg.Wait()
	waitFor(t, 90*time.Second, "every task handled", func() bool {
		st := mustStats(t, ctx, check)
		return r.handled.Load() == int64(total) && st.Pending == 0 && st.InFlight == 0
	})
	_ = r.stop()
	t.Logf("5 pauses and resumes, %d connections killed", killed.Load())
	if killed.Load() < 5 {
		t.Errorf("%d connections killed, want at least 5", killed.Load())
	}
	r.check(t, total)
}

// TestFaultRateLimitRestart: a queue limited to 100 tasks a second (burst
// 10) drains a backlog while its server is killed (SIGKILL) and started
// again twice, with appendfsync always. The limit and its bucket survive
// (Stats.Rate), in no window W are there more than 100·W + 10 deliveries
// across the restarts, no task is early, and every task is handled once.
func TestFaultRateLimitRestart(t *testing.T) {
	t.Parallel()
	env := newFaultEnv(t, "--appendonly", "yes", "--appendfsync", "always")
	ctx := testCtx(t)
	c := env.srv.Client(&redis.Options{ContextTimeoutEnabled: true})
	const (
		n         = 500
		perSecond = 100
		burst     = 10
	)
	r := startControlRun(t, c, n, Options{})
	if err := r.q.SetRate(ctx, Rate{PerSecond: perSecond, Burst: burst}); err != nil {
		t.Fatal(err)
	}
	r.run(t)
	for k := range 2 {
		waitFor(t, 60*time.Second, "deliveries before restart "+strconv.Itoa(k+1), func() bool {
			return r.handled.Load() >= int64(150*(k+1))
		})
		env.srv.Restart()
	}
	if st := mustStats(t, ctx, r.q); st.Rate != (Rate{PerSecond: perSecond, Burst: burst}) {
		t.Fatalf("after two restarts Stats.Rate %+v, want the limit set", st.Rate)
	}
	waitFor(t, 60*time.Second, "every task handled", func() bool { return r.handled.Load() == n })
	_ = r.stop()
	ds := r.times()
	checkRateWindows(t, ds, perSecond, burst, " across restarts", 100, 1000, 3000)
	t.Logf("%d tasks in %d ms across 2 restarts", n, ds[len(ds)-1]-ds[0])
	r.check(t, n)
}
