package periodic

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delayraw"
	"github.com/tierset/tierset/internal/testredis"
)

// stuck is a schedule whose Next does not advance.
type stuck struct{}

func (stuck) Next(t time.Time) time.Time { return t }

// Every bad input is a *ValidationError naming it, and nothing is written.
func TestBadInput(t *testing.T) {
	b := testredis.Mini(t)
	ctx := testredis.Ctx(t)
	q := newQueue(t, b)
	s, err := New(q, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add(Job{Name: "dup", Schedule: Every(time.Second)}); err != nil {
		t.Fatal(err)
	}
	add := func(j Job) func() error { return func() error { return s.Add(j) } }
	sec := Every(time.Second)
	rows := []struct {
		name string
		call func() error
		want error
	}{
		{"empty name", add(Job{Schedule: sec}), &ValidationError{Field: "name"}},
		{"overlong name", add(Job{Name: strings.Repeat("n", MaxNameBytes+1), Schedule: sec}), &ValidationError{Field: "name"}},
		{"name with a brace", add(Job{Name: "a{b}", Schedule: sec}), &ValidationError{Field: "name"}},
		{"name with a space", add(Job{Name: "a b", Schedule: sec}), &ValidationError{Field: "name"}},
		{"name added twice", add(Job{Name: "dup", Schedule: sec}), &ValidationError{Field: "name"}},
		{"nil schedule", add(Job{Name: "j"}), &ValidationError{Field: "schedule"}},
		{"Next does not advance", add(Job{Name: "j", Schedule: stuck{}}), &ValidationError{Field: "schedule"}},
		{"period under MinPeriod", add(Job{Name: "j", Schedule: Every(MinPeriod - time.Millisecond)}), &ValidationError{Field: "period"}},
		{"zero period", add(Job{Name: "j", Schedule: Every(0)}), &ValidationError{Field: "schedule"}},
		{"unknown catch-up", add(Job{Name: "j", Schedule: sec, CatchUp: 7}), &ValidationError{Field: "catchup"}},
		{"MaxCatchUp over the cap", add(Job{Name: "j", Schedule: sec, CatchUp: CatchUpAll, MaxCatchUp: MaxCatchUp + 1}), &ValidationError{Field: "catchup"}},
		{"negative Grace", add(Job{Name: "j", Schedule: sec, Grace: -time.Second}), &ValidationError{Field: "catchup"}},
		{"nil queue", func() error { _, err := New(nil, Options{}); return err }, &ValidationError{Field: "queue"}},
		{"TTL under 300ms", func() error { _, err := New(q, Options{TTL: 100 * time.Millisecond}); return err }, &ValidationError{Field: "options"}},
		{"process with a space", func() error { _, err := New(q, Options{Process: "a b"}); return err }, &ValidationError{Field: "options"}},
		{"pause: bad name", func() error { return Pause(ctx, q, "") }, &ValidationError{Field: "name"}},
		{"pause: never declared", func() error { return Pause(ctx, q, "nobody") }, ErrNotFound},
		{"resume: never declared", func() error { return Resume(ctx, q, "nobody") }, ErrNotFound},
		{"pause: overlong name", func() error { return Pause(ctx, q, strings.Repeat("n", MaxNameBytes+1)) }, &ValidationError{Field: "name"}},
		{"resume: nil queue", func() error { return Resume(ctx, nil, "j") }, &ValidationError{Field: "queue"}},
		{"forget: empty name", func() error { return Forget(ctx, q, "") }, &ValidationError{Field: "name"}},
		{"forget: glob in name", func() error { return Forget(ctx, q, "a*") }, &ValidationError{Field: "name"}},
		{"forget: never declared", func() error { return Forget(ctx, q, "nobody") }, ErrNotFound},
		{"list: nil queue", func() error { _, err := List(ctx, nil); return err }, &ValidationError{Field: "queue"}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			err := r.call()
			if !errors.Is(err, r.want) {
				t.Fatalf("%v, want %v", err, r.want)
			}
			var ve *ValidationError
			if errors.As(r.want, &ve) && !errors.Is(err, ErrInvalid) {
				t.Fatalf("%v does not match ErrInvalid", err)
			}
		})
	}
	if n, err := testredis.CountKeys(ctx, b.Client, b.Prefix); err != nil || n != 0 {
		t.Fatalf("%d keys written (%v), want none", n, err)
	}
}

// Every ticks at the multiples of its period since the Unix epoch, so
// that every process computes the same instants.
func TestEvery(t *testing.T) {
	e := Every(1500 * time.Millisecond)
	rows := []struct{ from, want time.Time }{
		{t0, t0.Add(1500 * time.Millisecond)},
		{t0.Add(time.Millisecond), t0.Add(1500 * time.Millisecond)},
		{t0.Add(1499 * time.Millisecond), t0.Add(1500 * time.Millisecond)},
		{t0.Add(1500 * time.Millisecond), t0.Add(3 * time.Second)},
	}
	for _, r := range rows {
		if got := e.Next(r.from); !got.Equal(r.want) {
			t.Errorf("Next(%v) = %v, want %v", r.from, got, r.want)
		}
	}
}

// The guard outlives the tick's task: once the task was taken and acked
// (gone from Redis: no DoneTTL), a process that asks for the same tick
// again gets "stale" and no task, which the (key, token) check alone
// could not give. A tick in the future by Redis TIME is "early", a caller
// without a live declaration "undeclared"; neither writes a task.
func TestTickGuardOutlivesTask(t *testing.T) {
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		q := newQueue(t, b)
		st := newStepper(t, q, Options{Logger: quietLogger(), Process: "p1"}, Job{Name: "j", Schedule: Every(time.Hour)})
		st.step(ctx) // declares
		e := st.s.jobs["j"]
		now, err := b.Client.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		tick := now.Add(-time.Minute).Truncate(time.Millisecond)
		call := func(at time.Time, proc string) delay.Tick {
			t.Helper()
			out, err := q.EnqueueTick(ctx, delay.Tick{Key: "j", Time: at, State: st.s.k.job("j"), Process: proc, Def: e.def})
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		if out := call(tick, "p1"); out.Outcome != "enqueued" || !out.Task.Due.Equal(tick) {
			t.Fatalf("first call: %+v, want enqueued, due at the tick", out)
		}
		if out := call(tick, "p1"); out.Outcome != "stale" {
			t.Fatalf("same tick while its task is pending: %q, want stale", out.Outcome)
		}
		bt, err := delayraw.Take(ctx, q, 10)
		if err != nil || len(bt) != 1 {
			t.Fatalf("take: %d tasks, %v", len(bt), err)
		}
		if errs, err := delayraw.Ack(ctx, q, bt); err != nil || errs[0] != nil {
			t.Fatal(err, errs)
		}
		if out := call(tick, "p1"); out.Outcome != "stale" || !out.Last.Equal(tick) {
			t.Fatalf("same tick after its task was acked: %+v, want stale", out)
		}
		if out := call(tick.Add(-time.Second), "p1"); out.Outcome != "stale" {
			t.Fatalf("an older tick: %q, want stale", out.Outcome)
		}
		if out := call(now.Add(time.Hour), "p1"); out.Outcome != "early" {
			t.Fatalf("a tick an hour ahead of Redis TIME: %q, want early", out.Outcome)
		}
		if out := call(tick.Add(time.Second), "p2"); out.Outcome != "undeclared" {
			t.Fatalf("a process that never declared: %q, want undeclared", out.Outcome)
		}
		if got, err := lookup(ctx, q, "j"); err != nil || len(got) != 0 {
			t.Fatalf("tasks of j: %+v %v, want none (the one tick was acked)", got, err)
		}
	})
}

// After every process was down for several ticks, the missed ticks follow
// the job's CatchUp policy; the tick due now is always enqueued (skip:
// while within Grace). Redis TIME is set by hand (miniredis).
func TestCatchUp(t *testing.T) {
	rows := []struct {
		name string
		job  Job
		// ticks (s after t0) once Redis TIME reached 6.5 s, then 7 s
		at65, at7 []int64
	}{
		{"one (default)", Job{}, []int64{1000, 6000}, []int64{1000, 6000, 7000}},
		{"skip, the last within Grace", Job{CatchUp: CatchUpSkip}, []int64{1000, 6000}, []int64{1000, 6000, 7000}},
		{"skip, the last past Grace", Job{CatchUp: CatchUpSkip, Grace: 200 * time.Millisecond}, []int64{1000}, []int64{1000, 7000}},
		{"all, bounded by MaxCatchUp", Job{CatchUp: CatchUpAll, MaxCatchUp: 2}, []int64{1000, 4000, 5000, 6000}, []int64{1000, 4000, 5000, 6000, 7000}},
		{"all", Job{CatchUp: CatchUpAll}, []int64{1000, 2000, 3000, 4000, 5000, 6000}, []int64{1000, 2000, 3000, 4000, 5000, 6000, 7000}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			b := testredis.Mini(t)
			ctx := testredis.Ctx(t)
			q := newQueue(t, b)
			j := r.job
			j.Name, j.Schedule = "j", Every(time.Second)
			b.Mini.SetTime(t0.Add(100 * time.Millisecond))
			first := newStepper(t, q, Options{Logger: quietLogger()}, j)
			first.step(ctx)
			b.Mini.SetTime(t0.Add(1000 * time.Millisecond))
			first.step(ctx)
			// every process down from 1 s to 6.5 s; a new one comes up
			b.Mini.SetTime(t0.Add(6500 * time.Millisecond))
			next := newStepper(t, q, Options{Logger: quietLogger()}, j)
			next.step(ctx)
			if got := ticksOf(t, ctx, q, "j"); !equalInts(got, r.at65) {
				t.Fatalf("at 6.5 s: ticks %v, want %v", got, r.at65)
			}
			b.Mini.SetTime(t0.Add(7000 * time.Millisecond))
			next.step(ctx)
			if got := ticksOf(t, ctx, q, "j"); !equalInts(got, r.at7) {
				t.Fatalf("at 7 s: ticks %v, want %v", got, r.at7)
			}
		})
	}
}

// A schedule changed in a rolling deploy: two definitions of one name are
// live at once. The one declared first drives the ticks until no process
// declares it; the other's processes enqueue nothing meanwhile, so every
// tick follows one schedule from the one before it, and none doubles.
// The change is logged and List reports it.
func TestRollingScheduleChange(t *testing.T) {
	b := testredis.Mini(t)
	ctx := testredis.Ctx(t)
	q := newQueue(t, b)
	var logs logBuf
	o := Options{Logger: slogTo(&logs)}
	b.Mini.SetTime(t0.Add(100 * time.Millisecond))
	oa, ob := o, o
	oa.Process, ob.Process = "old", "new"
	a := newStepper(t, q, oa, Job{Name: "j", Schedule: Every(time.Second)})
	a.step(ctx)
	b.Mini.SetTime(t0.Add(200 * time.Millisecond))
	nb := newStepper(t, q, ob, Job{Name: "j", Schedule: Every(1500 * time.Millisecond)})
	nb.step(ctx)
	for _, ms := range []int64{1000, 1500, 2000, 2500, 3000, 3500, 4000} {
		b.Mini.SetTime(t0.Add(time.Duration(ms) * time.Millisecond))
		nb.step(ctx) // the new one first: it must still enqueue nothing
		a.step(ctx)
	}
	if got, want := ticksOf(t, ctx, q, "j"), []int64{1000, 2000, 3000, 4000}; !equalInts(got, want) {
		t.Fatalf("while both live: ticks %v, want the old schedule's %v", got, want)
	}
	if !strings.Contains(logs.String(), "several live definitions") {
		t.Fatalf("no conflict logged; logs:\n%s", logs.String())
	}
	jobs, err := List(ctx, q)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("List: %+v %v", jobs, err)
	}
	ji := jobs[0]
	if !ji.Conflict || len(ji.Definitions) != 2 || ji.Spec != "every 1s" || ji.Definitions[0].Processes[0].Process != "old" ||
		ji.Definitions[1].Processes[0].Process != "new" || !ji.Last.Equal(t0.Add(4*time.Second)) || !ji.Next.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("List during the change: %+v", ji)
	}
	// the deploy ends: the old process stops
	a.r.undeclare(ctx)
	for _, ms := range []int64{4500, 5000, 5500, 6000} {
		b.Mini.SetTime(t0.Add(time.Duration(ms) * time.Millisecond))
		nb.step(ctx)
	}
	if got, want := ticksOf(t, ctx, q, "j"), []int64{1000, 2000, 3000, 4000, 4500, 6000}; !equalInts(got, want) {
		t.Fatalf("after the change: ticks %v, want %v", got, want)
	}
	if !strings.Contains(logs.String(), "one live definition again") {
		t.Fatalf("the end of the change not logged; logs:\n%s", logs.String())
	}
	if jobs, _ := List(ctx, q); jobs[0].Conflict || jobs[0].Spec != "every 1.5s" {
		t.Fatalf("List after the change: %+v", jobs[0])
	}
}

// A job ticks while some live process declares it: Remove in one process
// leaves it to the others; once none declares it, no tick is enqueued.
// A process whose declaration expired (frozen past TTL) is refused.
func TestRemoveStopsTicks(t *testing.T) {
	b := testredis.Mini(t)
	ctx := testredis.Ctx(t)
	q := newQueue(t, b)
	j := Job{Name: "j", Schedule: Every(time.Second)}
	b.Mini.SetTime(t0.Add(100 * time.Millisecond))
	p1 := newStepper(t, q, Options{Logger: quietLogger(), TTL: 5 * time.Second}, j)
	p2 := newStepper(t, q, Options{Logger: quietLogger(), TTL: 5 * time.Second}, j)
	p1.step(ctx)
	p2.step(ctx)
	if !p1.s.Remove("j") || p1.s.Remove("j") {
		t.Fatal("Remove: want true once, then false")
	}
	for _, ms := range []int64{1000, 2000} {
		b.Mini.SetTime(t0.Add(time.Duration(ms) * time.Millisecond))
		p1.step(ctx)
		p2.step(ctx)
	}
	if got := ticksOf(t, ctx, q, "j"); !equalInts(got, []int64{1000, 2000}) {
		t.Fatalf("with p2 declaring: ticks %v", got)
	}
	if jobs, _ := List(ctx, q); len(jobs[0].Definitions) != 1 || len(jobs[0].Definitions[0].Processes) != 1 {
		t.Fatalf("List after p1's Remove: %+v", jobs[0])
	}
	// p2 freezes past its TTL: its late tick is refused
	b.Mini.SetTime(t0.Add(8 * time.Second))
	p2.r.tick(ctx, p2.s.jobs["j"])
	p2.s.Remove("j")
	p2.step(ctx)
	for _, ms := range []int64{9000, 10000} {
		b.Mini.SetTime(t0.Add(time.Duration(ms) * time.Millisecond))
		p1.step(ctx)
		p2.step(ctx)
	}
	if got := ticksOf(t, ctx, q, "j"); !equalInts(got, []int64{1000, 2000}) {
		t.Fatalf("with no live declaration: ticks %v, want none after 2 s", got)
	}
	if jobs, _ := List(ctx, q); len(jobs) != 1 || len(jobs[0].Definitions) != 0 || jobs[0].Spec != "" {
		t.Fatalf("List with no declaration: %+v", jobs)
	}
}

// Pause stops a job's tasks in every process; its ticks pass meanwhile,
// so Resume brings no burst: the next tick is the next task.
func TestPauseResume(t *testing.T) {
	b := testredis.Mini(t)
	ctx := testredis.Ctx(t)
	q := newQueue(t, b)
	j := Job{Name: "j", Schedule: Every(time.Second), CatchUp: CatchUpAll}
	b.Mini.SetTime(t0.Add(100 * time.Millisecond))
	p := newStepper(t, q, Options{Logger: quietLogger()}, j)
	p.step(ctx)
	b.Mini.SetTime(t0.Add(time.Second))
	p.step(ctx)
	if err := Pause(ctx, q, "j"); err != nil {
		t.Fatal(err)
	}
	for _, ms := range []int64{2000, 3000, 4500} {
		b.Mini.SetTime(t0.Add(time.Duration(ms) * time.Millisecond))
		p.step(ctx)
	}
	jobs, err := List(ctx, q)
	if err != nil || !jobs[0].Paused || !jobs[0].PausedSince.Equal(t0.Add(time.Second)) ||
		!jobs[0].Last.Equal(t0.Add(4*time.Second)) || !jobs[0].LastEnqueued.Equal(t0.Add(time.Second)) {
		t.Fatalf("List while paused: %+v %v", jobs, err)
	}
	if err := Resume(ctx, q, "j"); err != nil {
		t.Fatal(err)
	}
	b.Mini.SetTime(t0.Add(5 * time.Second))
	p.step(ctx)
	if got := ticksOf(t, ctx, q, "j"); !equalInts(got, []int64{1000, 5000}) {
		t.Fatalf("ticks %v, want 1 s, then none while paused, then 5 s", got)
	}
}

// Run with two definitions live (real time): the ticks follow the first
// declared, and the other process, whose next tick is often already due
// from the winner's guard, waits between refusals instead of asking in a
// loop.
func TestRunLoserDoesNotSpin(t *testing.T) {
	b := testredis.Mini(t)
	q := newQueue(t, b)
	ctx, cancel := context.WithCancel(testredis.Ctx(t))
	var runs sync.WaitGroup
	t.Cleanup(func() { cancel(); runs.Wait() })
	a, err := New(q, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Add(Job{Name: "j", Schedule: Every(200 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	runs.Go(func() { _ = a.Run(ctx) })
	// the loser: its own client, whose commands are counted
	var sent atomic.Int64
	lc := redis.NewClient(&redis.Options{Addr: b.Mini.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = lc.Close() })
	lc.AddHook(countHook{&sent})
	lq, err := delay.New(lc, "q", delay.Options{Prefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for jobs, _ := List(ctx, q); len(jobs) == 0 || len(jobs[0].Definitions) == 0; jobs, _ = List(ctx, q) {
		if time.Now().After(deadline) {
			t.Fatal("the first process did not declare within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	bs, err := New(lq, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := bs.Add(Job{Name: "j", Schedule: Every(300 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	runs.Go(func() { _ = bs.Run(ctx) })
	start := time.Now()
	// until six ticks of the winner were enqueued after the loser started
	var infos []delay.TaskInfo
	for {
		infos, err = lookup(ctx, q, "j")
		if err != nil {
			t.Fatal(err)
		}
		late := 0
		for _, in := range infos {
			if in.When.After(start) {
				late++
			}
		}
		if late >= 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d ticks after the second process started, want 6 within 10 s", late)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmds, elapsed := sent.Load(), time.Since(start)
	for _, in := range infos {
		if in.When.UnixMilli()%200 != 0 {
			t.Fatalf("tick at %v: not on the first definition's 200 ms grid", in.When)
		}
	}
	// the loser: a declaration (TIME and a transaction), then per 300 ms
	// tick at most a TIME and a script, and a retry every otherWait
	if limit := 2 + 2*int(elapsed/(300*time.Millisecond)+elapsed/(500*time.Millisecond)+2); cmds > int64(limit) {
		t.Fatalf("the losing process sent %d commands in %v, want at most %d: it spins", cmds, elapsed, limit)
	}
	t.Logf("the losing process sent %d commands in %v", cmds, elapsed)
}

// countHook counts the commands a client sends (a pipeline counts once).
type countHook struct{ n *atomic.Int64 }

func (countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}
