package periodic

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/testredis"
)

// fleet runs Schedulers (Run, real time) on one queue and stops them.
type fleet struct {
	t    *testing.T
	ctx  context.Context
	mu   sync.Mutex
	stop []func()
}

func newFleet(t *testing.T, ctx context.Context) *fleet {
	f := &fleet{t: t, ctx: ctx}
	t.Cleanup(f.stopAll)
	return f
}

// start runs one Scheduler with j and returns its stop (which waits for
// Run to return).
func (f *fleet) start(q *delay.Queue, o Options, j Job) func() {
	f.t.Helper()
	s, err := New(q, o)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := s.Add(j); err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				f.t.Errorf("Run: %v", err)
			}
		})
	}
	f.mu.Lock()
	f.stop = append(f.stop, stop)
	f.mu.Unlock()
	return stop
}

func (f *fleet) stopAll() {
	f.mu.Lock()
	stops := f.stop
	f.mu.Unlock()
	for _, s := range stops {
		s()
	}
}

// redisNow is Redis TIME.
func redisNow(t *testing.T, ctx context.Context, b *testredis.Backend) time.Time {
	t.Helper()
	now, err := b.Client.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// absTicks is the tick (Unix ms) of every task of job, sorted; it fails
// on two tasks of one tick or a task not due at its tick.
func absTicks(t *testing.T, ctx context.Context, q *delay.Queue, job string) []int64 {
	t.Helper()
	rel := ticksOf(t, ctx, q, job)
	out := make([]int64, len(rel))
	for i, r := range rel {
		out[i] = r + t0.UnixMilli()
	}
	return out
}

// contiguous fails unless ticks (Unix ms, sorted) are every period
// apart from lo through hi inclusive, where they lie in [lo, hi].
func contiguous(t *testing.T, ticks []int64, period, lo, hi int64, what string) {
	t.Helper()
	var in []int64
	for _, k := range ticks {
		if k >= lo && k <= hi {
			in = append(in, k)
		}
	}
	for i := 1; i < len(in); i++ {
		if in[i]-in[i-1] != period {
			t.Errorf("%s: gap between ticks %d and %d (period %d)", what, in[i-1], in[i], period)
		}
	}
}

// Many schedulers, Pause and Resume each called by several goroutines
// at once, and processes started while paused: one task per tick before
// the pause and after the resume, none for a tick in between, no burst
// on resume even with CatchUpAll, and the observers of every process add
// up to the ticks handled (enqueued = tasks; enqueued + missed = ticks
// from the first through Last).
func TestAdvPauseResumeRace(t *testing.T) {
	t.Parallel()
	b := testredis.Redis(t)
	ctx := testredis.Ctx(t)
	q := newQueue(t, b)
	period := MinPeriod
	pms := period.Milliseconds()
	j := Job{Name: "j", Schedule: Every(period), CatchUp: CatchUpAll, MaxCatchUp: MaxCatchUp}
	f := newFleet(t, ctx)
	tallies := make([]*tally, 8)
	for i := range tallies {
		tallies[i] = &tally{}
	}
	opt := func(i int) Options {
		return Options{Logger: quietLogger(), Process: fmt.Sprintf("p%d", i), TTL: 3 * time.Second, Observer: tallies[i].observer(t)}
	}
	for i := range 6 {
		f.start(q, opt(i), j)
	}
	nTasks := func() int { infos, _ := lookup(ctx, q, "j"); return len(infos) }
	waitFor(t, "3 tasks", 10*time.Second, func() bool { return nTasks() >= 3 })

	concurrently := func(n int, call func() error) {
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := call(); err != nil {
					t.Errorf("concurrent call: %v", err)
				}
			}()
		}
		wg.Wait()
	}
	pauseStart := redisNow(t, ctx, b)
	concurrently(4, func() error { return Pause(ctx, q, "j") })
	paused := redisNow(t, ctx, b)
	jobs, err := List(ctx, q)
	if err != nil || len(jobs) != 1 || !jobs[0].Paused || jobs[0].PausedSince.Before(pauseStart.Truncate(time.Millisecond)) || jobs[0].PausedSince.After(paused) {
		t.Fatalf("List after Pause: %+v %v (pause between %v and %v)", jobs, err, pauseStart, paused)
	}
	// processes started while paused obey the pause too
	f.start(q, opt(6), j)
	f.start(q, opt(7), j)
	waitFor(t, "8 ticks passed while paused", 10*time.Second, func() bool {
		jobs, err := List(ctx, q)
		return err == nil && len(jobs) == 1 && jobs[0].Last.After(paused.Add(8*period))
	})
	resumeStart := redisNow(t, ctx, b)
	concurrently(4, func() error { return Resume(ctx, q, "j") })
	resumed := redisNow(t, ctx, b)
	waitFor(t, "5 ticks after the resume", 10*time.Second, func() bool {
		infos, _ := lookup(ctx, q, "j")
		n := 0
		for _, in := range infos {
			if in.When.After(resumed) {
				n++
			}
		}
		return n >= 5
	})
	f.stopAll()

	ticks := absTicks(t, ctx, q, "j")
	for _, k := range ticks {
		if k > paused.UnixMilli() && k <= resumeStart.UnixMilli() {
			t.Errorf("a task for tick %d, in the pause (%d, %d]", k, paused.UnixMilli(), resumeStart.UnixMilli())
		}
	}
	contiguous(t, ticks, pms, 0, pauseStart.UnixMilli(), "before the pause")
	contiguous(t, ticks, pms, resumed.UnixMilli(), 1<<62, "after the resume")

	pausedN := countedOnce(t, ctx, q, tallies, ticks, pms)
	if pausedN < 8 {
		t.Errorf("%d ticks counted paused, want at least the 8 waited for", pausedN)
	}
}

// Forget races declarations: while a process is seen declaring the job
// Forget refuses (ErrDeclared); with processes starting and stopping
// around it, each Forget returns nil, ErrDeclared or ErrNotFound and the
// ticks never double.
func TestAdvForgetRace(t *testing.T) {
	b := testredis.Redis(t)
	ctx := testredis.Ctx(t)
	q := newQueue(t, b)
	j := Job{Name: "j", Schedule: Every(MinPeriod), CatchUp: CatchUpAll, MaxCatchUp: MaxCatchUp}
	f := newFleet(t, ctx)
	declared := func(p string) bool {
		jobs, err := List(ctx, q)
		if err != nil {
			return false
		}
		for _, ji := range jobs {
			for _, d := range ji.Definitions {
				for _, dp := range d.Processes {
					if dp.Process == p {
						return true
					}
				}
			}
		}
		return false
	}
	outcomes := map[string]int{}
	var mu sync.Mutex
	for i := range 8 {
		pa := fmt.Sprintf("a%d", i)
		stopA := f.start(q, Options{Logger: quietLogger(), Process: pa, TTL: 3 * time.Second}, j)
		waitFor(t, pa+" declared", 10*time.Second, func() bool { return declared(pa) })
		if err := Forget(ctx, q, "j"); !errors.Is(err, ErrDeclared) {
			t.Fatalf("Forget while %s declares: %v, want ErrDeclared", pa, err)
		}
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 5 {
					err := Forget(ctx, q, "j")
					k := "nil"
					switch {
					case err == nil:
					case errors.Is(err, ErrDeclared):
						k = "declared"
					case errors.Is(err, ErrNotFound):
						k = "notfound"
					default:
						t.Errorf("Forget: %v", err)
						k = "other"
					}
					mu.Lock()
					outcomes[k]++
					mu.Unlock()
				}
			}()
		}
		stopA()
		var stopB func()
		if i%2 == 0 {
			stopB = f.start(q, Options{Logger: quietLogger(), Process: fmt.Sprintf("b%d", i), TTL: 3 * time.Second}, j)
		}
		wg.Wait()
		if stopB != nil {
			stopB()
		}
		absTicks(t, ctx, q, "j") // fails on a doubled tick
	}
	f.stopAll()
	if err := Forget(ctx, q, "j"); err != nil && !errors.Is(err, ErrNotFound) {
		t.Fatalf("Forget with every process stopped: %v", err)
	}
	if jobs, err := List(ctx, q); err != nil || len(jobs) != 0 {
		t.Fatalf("List after the last Forget: %+v %v", jobs, err)
	}
	t.Logf("Forget outcomes: %v", outcomes)
	absTicks(t, ctx, q, "j")
}

// Process clocks an hour apart either way (Options.Now) change nothing
// (CatchUpAll: a starved machine makes passes late, and CatchUpOne
// would drop the older of two due ticks):
// one task per tick, due at its tick, no gap.
func TestAdvSkewedClocks(t *testing.T) {
	t.Parallel()
	b := testredis.Redis(t)
	ctx := testredis.Ctx(t)
	q := newQueue(t, b)
	j := Job{Name: "j", Schedule: Every(MinPeriod), CatchUp: CatchUpAll, MaxCatchUp: MaxCatchUp}
	f := newFleet(t, ctx)
	for i, skew := range []time.Duration{-time.Hour, 0, time.Hour, 37 * time.Second} {
		skew := skew
		f.start(q, Options{Logger: quietLogger(), Process: fmt.Sprintf("p%d", i), Now: func() time.Time { return time.Now().Add(skew) }}, j)
	}
	start := redisNow(t, ctx, b)
	waitFor(t, "10 ticks", 10*time.Second, func() bool {
		infos, _ := lookup(ctx, q, "j")
		return len(infos) >= 10
	})
	f.stopAll()
	ticks := absTicks(t, ctx, q, "j")
	contiguous(t, ticks, MinPeriod.Milliseconds(), 0, 1<<62, "skewed clocks")
	if first := ticks[0]; first > start.Add(2*MinPeriod).UnixMilli() {
		t.Errorf("first task at tick %d, more than two periods after the start %d", first, start.UnixMilli())
	}
}
