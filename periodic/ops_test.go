package periodic

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delayraw"
	"github.com/tierset/tierset/internal/testredis"
)

// List shows each job's catch-up policy and, per live process, when it
// last declared the job (Redis TIME) and when that declaration lapses.
func TestListDeclarations(t *testing.T) {
	b := testredis.Mini(t)
	ctx := testredis.Ctx(t)
	q := newQueue(t, b)
	j := Job{Name: "j", Schedule: Every(time.Second), CatchUp: CatchUpAll, MaxCatchUp: 3, Spec: "each second, all of them"}
	b.Mini.SetTime(t0.Add(100 * time.Millisecond))
	p1 := newStepper(t, q, Options{Logger: quietLogger(), Process: "p1", TTL: 9 * time.Second}, j)
	p1.step(ctx)
	b.Mini.SetTime(t0.Add(700 * time.Millisecond))
	p2 := newStepper(t, q, Options{Logger: quietLogger(), Process: "p2", TTL: 3 * time.Second}, j)
	p2.step(ctx)
	jobs, err := List(ctx, q)
	if err != nil || len(jobs) != 1 || len(jobs[0].Definitions) != 1 {
		t.Fatalf("List: %+v %v", jobs, err)
	}
	ji, d := jobs[0], jobs[0].Definitions[0]
	if ji.CatchUp != CatchUpAll || d.CatchUp != CatchUpAll || d.MaxCatchUp != 3 || d.Grace != time.Second ||
		ji.Spec != "each second, all of them" || !d.FirstDeclared.Equal(t0.Add(100*time.Millisecond)) {
		t.Fatalf("List: %+v", ji)
	}
	want := []Declaration{
		{Process: "p1", Declared: t0.Add(100 * time.Millisecond), Expires: t0.Add(9100 * time.Millisecond)},
		{Process: "p2", Declared: t0.Add(700 * time.Millisecond), Expires: t0.Add(3700 * time.Millisecond)},
	}
	if len(d.Processes) != 2 {
		t.Fatalf("processes %+v, want %+v", d.Processes, want)
	}
	for i, w := range want {
		if g := d.Processes[i]; g.Process != w.Process || !g.Declared.Equal(w.Declared) || !g.Expires.Equal(w.Expires) {
			t.Errorf("process %d: %+v, want %+v", i, g, w)
		}
	}
	// p1 declares again: its Declared moves; p2's lapses unrenewed
	b.Mini.SetTime(t0.Add(4 * time.Second))
	p1.step(ctx)
	jobs, _ = List(ctx, q)
	if ps := jobs[0].Definitions[0].Processes; len(ps) != 1 || ps[0].Process != "p1" || !ps[0].Declared.Equal(t0.Add(4*time.Second)) {
		t.Fatalf("after p1's renewal and p2's lapse: %+v", ps)
	}
}

// Forget refuses while a live process declares the job (ErrDeclared,
// naming them) and deletes nothing; once none does, it deletes the job's
// state and name: List no longer shows it, Pause finds nothing.
func TestForget(t *testing.T) {
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		q := newQueue(t, b)
		j := Job{Name: "j", Schedule: Every(time.Hour)}
		p1 := newStepper(t, q, Options{Logger: quietLogger(), Process: "p1"}, j)
		p2 := newStepper(t, q, Options{Logger: quietLogger(), Process: "p2"}, j, Job{Name: "other", Schedule: Every(time.Hour)})
		p1.step(ctx)
		p2.step(ctx)
		if err := Pause(ctx, q, "j"); err != nil {
			t.Fatal(err)
		}
		err := Forget(ctx, q, "j")
		if !errors.Is(err, ErrDeclared) || !strings.Contains(err.Error(), "p1, p2") {
			t.Fatalf("Forget with two live declarations: %v, want ErrDeclared naming p1, p2", err)
		}
		p1.r.undeclare(ctx)
		if err := Forget(ctx, q, "j"); !errors.Is(err, ErrDeclared) || !strings.Contains(err.Error(), "p2") {
			t.Fatalf("Forget with p2 live: %v, want ErrDeclared", err)
		}
		if jobs, err := List(ctx, q); err != nil || len(jobs) != 2 || !jobs[0].Paused {
			t.Fatalf("a refused Forget changed something: %+v %v", jobs, err)
		}
		p2.s.Remove("j")
		p2.step(ctx)
		if err := Forget(ctx, q, "j"); err != nil {
			t.Fatalf("Forget with no live declaration: %v", err)
		}
		jobs, err := List(ctx, q)
		if err != nil || len(jobs) != 1 || jobs[0].Name != "other" {
			t.Fatalf("List after Forget: %+v %v, want only other", jobs, err)
		}
		k, _ := keysOf(q)
		if n, err := b.Client.Exists(ctx, k.job("j")).Result(); err != nil || n != 0 {
			t.Fatalf("the state hash of j: exists %d, %v", n, err)
		}
		for name, call := range map[string]func() error{
			"forget again": func() error { return Forget(ctx, q, "j") },
			"pause":        func() error { return Pause(ctx, q, "j") },
			"resume":       func() error { return Resume(ctx, q, "j") },
		} {
			if err := call(); !errors.Is(err, ErrNotFound) {
				t.Errorf("%s after Forget: %v, want ErrNotFound", name, err)
			}
		}
	})
}

// A process frozen past its TTL while its job was forgotten comes back
// and declares the job again: it starts over from its next tick and does
// not catch up from the guard it remembers, which would enqueue again
// ticks another process handled (their tasks acked and gone).
func TestForgetThenFrozenProcess(t *testing.T) {
	b := testredis.Mini(t)
	ctx := testredis.Ctx(t)
	q := newQueue(t, b)
	j := Job{Name: "j", Schedule: Every(time.Second), CatchUp: CatchUpAll}
	o := Options{Logger: quietLogger(), TTL: 3 * time.Second}
	b.Mini.SetTime(t0.Add(100 * time.Millisecond))
	frozen := newStepper(t, q, o, j)
	frozen.step(ctx)
	b.Mini.SetTime(t0.Add(time.Second))
	frozen.step(ctx) // tick 1 s; then it freezes
	other := newStepper(t, q, o, j)
	var handled []int64
	for _, ms := range []int64{2000, 3000, 4000, 5000} {
		b.Mini.SetTime(t0.Add(time.Duration(ms) * time.Millisecond))
		other.step(ctx)
		handled = append(handled, drain(t, ctx, q)...)
	}
	if !equalInts(handled, []int64{1000, 2000, 3000, 4000, 5000}) {
		t.Fatalf("before Forget: ticks %v", handled)
	}
	other.r.undeclare(ctx)
	if err := Forget(ctx, q, "j"); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	for _, ms := range []int64{6000, 7000} {
		b.Mini.SetTime(t0.Add(time.Duration(ms) * time.Millisecond))
		frozen.step(ctx)
		handled = append(handled, drain(t, ctx, q)...)
	}
	if want := []int64{1000, 2000, 3000, 4000, 5000, 7000}; !equalInts(handled, want) {
		t.Fatalf("ticks %v, want %v: after Forget the woken process starts at its next tick", handled, want)
	}
}

// drain takes and acks every task of q, returning their ticks (as ticksOf).
func drain(t *testing.T, ctx context.Context, q *delay.Queue) []int64 {
	t.Helper()
	ticks := ticksOf(t, ctx, q, "j")
	if len(ticks) == 0 {
		return nil
	}
	bt, err := delayraw.Take(ctx, q, 100)
	if err != nil || len(bt) != len(ticks) {
		t.Fatalf("take: %d tasks, %v; want %d", len(bt), err, len(ticks))
	}
	if errs, err := delayraw.Ack(ctx, q, bt); err != nil || errors.Join(errs...) != nil {
		t.Fatal(err, errs)
	}
	return ticks
}

// tally is an Observer's counts, per reason ("enqueued" for OnEnqueued).
type tally struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *tally) observer(t *testing.T) Observer {
	c.n = map[string]int{}
	return Observer{
		OnEnqueued: func(queue, job string) {
			if queue != "q" || job != "j" {
				t.Errorf("OnEnqueued(%q, %q)", queue, job)
			}
			c.mu.Lock()
			c.n["enqueued"]++
			c.mu.Unlock()
		},
		OnMissed: func(queue, job, reason string, n int) {
			if queue != "q" || job != "j" || n <= 0 {
				t.Errorf("OnMissed(%q, %q, %q, %d)", queue, job, reason, n)
			}
			c.mu.Lock()
			c.n[reason] += n
			c.mu.Unlock()
		},
	}
}

func (c *tally) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[k]
}

// countedOnce checks that the tallies, summed over processes, count each
// task's tick as enqueued and every tick from the first task's through
// job j's Last once (enqueued, dropped by catch-up or passed paused). It
// returns the ticks counted paused.
func countedOnce(t *testing.T, ctx context.Context, q *delay.Queue, tallies []*tally, ticks []int64, pms int64) (paused int) {
	t.Helper()
	jobs, err := List(ctx, q)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("List: %+v %v", jobs, err)
	}
	var enq, missed int
	for _, c := range tallies {
		enq += c.get("enqueued")
		missed += c.get("catchup")
		paused += c.get("paused")
	}
	if enq != len(ticks) {
		t.Errorf("observers counted %d enqueued, %d tasks", enq, len(ticks))
	}
	if want := int((jobs[0].Last.UnixMilli()-ticks[0])/pms) + 1; enq+missed+paused != want {
		t.Errorf("observers: %d enqueued + %d catchup + %d paused, want %d ticks from %d through Last %d",
			enq, missed, paused, want, ticks[0], jobs[0].Last.UnixMilli())
	}
	return paused
}

// The Observer counts each tick once across processes: enqueued, dropped
// by catch-up after an outage, or passed while paused. Two processes
// step alike; their counts add up to the ticks, whatever the policy.
func TestObserverCounts(t *testing.T) {
	rows := []struct {
		name                      string
		job                       Job
		enqueued, catchup, paused int
	}{
		// 1 s; out 2..4 s, back at 4.5 s: one catches up 4 s; paused 5, 6 s; 7 s
		{"one", Job{}, 3, 2, 2},
		{"skip, 4 s is past Grace at 4.5 s", Job{CatchUp: CatchUpSkip, Grace: 200 * time.Millisecond}, 2, 3, 2},
		{"all, MaxCatchUp 1", Job{CatchUp: CatchUpAll, MaxCatchUp: 1}, 4, 1, 2},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			b := testredis.Mini(t)
			ctx := testredis.Ctx(t)
			q := newQueue(t, b)
			j := r.job
			j.Name, j.Schedule = "j", Every(time.Second)
			var ca, cb tally
			b.Mini.SetTime(t0.Add(100 * time.Millisecond))
			pa := newStepper(t, q, Options{Logger: quietLogger(), Observer: ca.observer(t)}, j)
			pb := newStepper(t, q, Options{Logger: quietLogger(), Observer: cb.observer(t)}, j)
			both := func(ms int64) {
				b.Mini.SetTime(t0.Add(time.Duration(ms) * time.Millisecond))
				pa.step(ctx)
				pb.step(ctx)
			}
			both(100)
			both(1000)
			both(4500)
			if err := Pause(ctx, q, "j"); err != nil {
				t.Fatal(err)
			}
			both(5000)
			both(6000)
			if err := Resume(ctx, q, "j"); err != nil {
				t.Fatal(err)
			}
			both(7000)
			for _, c := range []struct {
				k    string
				want int
			}{{"enqueued", r.enqueued}, {"catchup", r.catchup}, {"paused", r.paused}} {
				if got := ca.get(c.k) + cb.get(c.k); got != c.want {
					t.Errorf("%s: %d + %d, want %d in all", c.k, ca.get(c.k), cb.get(c.k), c.want)
				}
			}
			if got := len(ticksOf(t, ctx, q, "j")); got != r.enqueued {
				t.Errorf("%d tasks, the observers counted %d enqueued", got, r.enqueued)
			}
		})
	}
}

// ticksBetween counts exactly, and estimates past maxWalk ticks.
func TestTicksBetween(t *testing.T) {
	sec := Every(time.Second)
	rows := []struct {
		a, b time.Time
		want int
	}{
		{t0, t0.Add(time.Second), 0},
		{t0, t0.Add(3 * time.Second), 2},
		{t0.Add(500 * time.Millisecond), t0.Add(3 * time.Second), 2},
		{t0, t0.Add(3500 * time.Millisecond), 3},
		{t0, t0.Add(time.Duration(3*maxWalk) * time.Second), 3*maxWalk - 1},
	}
	for _, r := range rows {
		if got := ticksBetween(sec, r.a, r.b); got != r.want {
			t.Errorf("ticksBetween(%v, %v) = %d, want %d", r.a.Sub(t0), r.b.Sub(t0), got, r.want)
		}
	}
}
