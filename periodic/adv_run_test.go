package periodic

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

// The package doc's own example, default Options: Run ticks, and when it
// returns its declaration is gone at once (not after TTL), so Forget
// succeeds right away.
func TestAdvDocExampleDefaults(t *testing.T) {
	b := testredis.Redis(t)
	ctx := testredis.Ctx(t)
	q := newQueue(t, b)
	s, err := New(q, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add(Job{Name: "report", Schedule: Every(MinPeriod)}); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(rctx) }()
	waitFor(t, "2 tasks", 10*time.Second, func() bool { infos, _ := lookup(ctx, q, "report"); return len(infos) >= 2 })
	jobs, err := List(ctx, q)
	if err != nil || len(jobs) != 1 || len(jobs[0].Definitions) != 1 || jobs[0].Spec == "" || jobs[0].Next.IsZero() {
		t.Fatalf("List while running: %+v %v", jobs, err)
	}
	if ps := jobs[0].Definitions[0].Processes; len(ps) != 1 || !ps[0].Expires.After(ps[0].Declared.Add(29*time.Second)) {
		t.Fatalf("declaration with the default TTL (30 s): %+v", ps)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	jobs, err = List(ctx, q)
	if err != nil || len(jobs) != 1 || len(jobs[0].Definitions) != 0 {
		t.Fatalf("List after Run returned: %+v %v, want the job with no live process", jobs, err)
	}
	if err := Forget(ctx, q, "report"); err != nil {
		t.Fatalf("Forget right after Run returned: %v", err)
	}
	absTicks(t, ctx, q, "report")
}

// sour ticks every second until its end, then its Next stops advancing
// (returns t) or goes back: a schedule Add's sampling passed.
type sour struct {
	end  time.Time
	back bool
}

func (s sour) Next(t time.Time) time.Time {
	if !t.Before(s.end) {
		if s.back {
			return t.Add(-time.Hour)
		}
		return t
	}
	return t.Truncate(time.Second).Add(time.Second)
}

// A schedule that passes Add and later stops advancing, or goes back,
// neither hangs a pass nor doubles a tick.
func TestAdvScheduleTurnsBad(t *testing.T) {
	for _, back := range []bool{false, true} {
		t.Run(fmt.Sprintf("back=%v", back), func(t *testing.T) {
			b := testredis.Mini(t)
			ctx := testredis.Ctx(t)
			q := newQueue(t, b)
			end := t0.Add(3 * time.Second)
			b.Mini.SetTime(t0.Add(-20 * time.Second)) // Add samples 16 good ticks
			j := Job{Name: "j", Schedule: sour{end: end, back: back}, CatchUp: CatchUpAll}
			p1 := newStepper(t, q, Options{Logger: quietLogger(), Process: "p1"}, j)
			p2 := newStepper(t, q, Options{Logger: quietLogger(), Process: "p2"}, j)
			for _, ms := range []int64{100, 1000, 2000, 3000, 4000, 5000, 9000} {
				b.Mini.SetTime(t0.Add(time.Duration(ms) * time.Millisecond))
				for _, p := range []*stepper{p1, p2} {
					stepped := make(chan struct{})
					go func() { defer close(stepped); p.step(ctx) }()
					select {
					case <-stepped:
					case <-time.After(10 * time.Second):
						t.Fatalf("a pass at %d ms did not return", ms)
					}
				}
			}
			got := ticksOf(t, ctx, q, "j") // fails on a doubled tick
			for _, k := range got {
				if k > 3000 {
					t.Errorf("tick %d ms after the schedule's end", k)
				}
			}
			if !equalInts(got, []int64{1000, 2000, 3000}) {
				t.Errorf("ticks %v, want 1000, 2000, 3000", got)
			}
		})
	}
}

// Add and Remove from other goroutines while Run runs (the Scheduler is
// documented safe for concurrent use): no race, and the job that stays
// ticks once per tick.
func TestAdvAddRemoveWhileRunning(t *testing.T) {
	b := testredis.Redis(t)
	ctx := testredis.Ctx(t)
	q := newQueue(t, b)
	s, err := New(q, Options{Logger: quietLogger(), TTL: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add(Job{Name: "j", Schedule: Every(MinPeriod), CatchUp: CatchUpAll, MaxCatchUp: MaxCatchUp}); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(rctx) }()
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				name := fmt.Sprintf("x%d-%d", g, i%3)
				if err := s.Add(Job{Name: name, Schedule: Every(MinPeriod)}); err != nil {
					t.Errorf("Add %s: %v", name, err)
				}
				time.Sleep(5 * time.Millisecond)
				if !s.Remove(name) {
					t.Errorf("Remove %s: not there", name)
				}
			}
		}()
	}
	wg.Wait()
	waitFor(t, "5 tasks of j", 10*time.Second, func() bool { infos, _ := lookup(ctx, q, "j"); return len(infos) >= 5 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ticks := absTicks(t, ctx, q, "j")
	contiguous(t, ticks, MinPeriod.Milliseconds(), 0, 1<<62, "j beside Add and Remove")
	jobs, err := List(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	for _, ji := range jobs {
		if len(ji.Definitions) != 0 {
			t.Errorf("job %s still declared after Run returned: %+v", ji.Name, ji.Definitions)
		}
	}
}
