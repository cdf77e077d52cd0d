package periodic

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/testredis"
)

func faultyQueue(t *testing.T, c redis.UniversalClient) *delay.Queue {
	t.Helper()
	q, err := delay.New(c, "q", delay.Options{Prefix: testredis.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// Replies cut (tick scripts, Pause, Resume), every client connection
// killed (CLIENT KILL) and all connections cut, while four schedulers
// run and an operator pauses and resumes: one task per tick outside the
// pause, none inside, PausedSince from the first (cut) Pause, and the
// observers still add up.
func TestFaultAdvCutRepliesPauseResume(t *testing.T) {
	t.Parallel()
	f := testredis.StartFaulty(t)
	ctx := testredis.Ctx(t)
	q := faultyQueue(t, f.Cut)
	direct := f.Server.Client(nil)
	t.Cleanup(func() { _ = direct.Close() })
	period := MinPeriod
	pms := period.Milliseconds()
	j := Job{Name: "j", Schedule: Every(period), CatchUp: CatchUpAll, MaxCatchUp: MaxCatchUp}
	fl := newFleet(t, ctx)
	tallies := make([]*tally, 4)
	for i := range tallies {
		tallies[i] = &tally{}
		fl.start(q, Options{Logger: quietLogger(), Process: fmt.Sprintf("p%d", i), TTL: 3 * time.Second, Observer: tallies[i].observer(t)}, j)
	}
	now := func() time.Time {
		t.Helper()
		n, err := direct.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	count := func(after time.Time) int {
		infos, err := lookup(ctx, q, "j")
		if err != nil {
			return 0
		}
		n := 0
		for _, in := range infos {
			if in.When.After(after) {
				n++
			}
		}
		return n
	}
	begin := now()
	for i := range 6 {
		f.Proxy.CutNext(1, faultproxy.Contains("evalsha"))
		if i == 3 {
			if err := direct.ClientKillByFilter(ctx, "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
				t.Fatal(err)
			}
		}
		if i == 4 {
			f.Proxy.CutAll()
		}
		mark := now()
		waitFor(t, "a tick after a fault", 10*time.Second, func() bool { return count(mark) >= 1 })
	}

	pauseStart := now()
	f.Proxy.CutNext(1, faultproxy.Any) // the Pause's own reply
	if err := Pause(ctx, q, "j"); err != nil {
		t.Fatalf("Pause with its reply cut (re-sent by the client): %v", err)
	}
	paused := now()
	if err := Pause(ctx, q, "j"); err != nil {
		t.Fatal(err)
	}
	jobs, err := List(ctx, q)
	if err != nil || len(jobs) != 1 || !jobs[0].Paused || jobs[0].PausedSince.After(paused) || jobs[0].PausedSince.Before(pauseStart.Truncate(time.Millisecond)) {
		t.Fatalf("List after a cut Pause and a second Pause: %+v %v (first Pause in [%v, %v])", jobs, err, pauseStart, paused)
	}
	for range 3 {
		f.Proxy.CutNext(1, faultproxy.Contains("evalsha"))
		mark := now()
		waitFor(t, "ticks passing while paused", 10*time.Second, func() bool {
			jobs, err := List(ctx, q)
			return err == nil && len(jobs) == 1 && jobs[0].Last.After(mark.Add(2*period))
		})
	}
	resumeStart := now()
	f.Proxy.CutNext(1, faultproxy.Any)
	if err := Resume(ctx, q, "j"); err != nil {
		t.Fatalf("Resume with its reply cut: %v", err)
	}
	resumed := now()
	for range 3 {
		f.Proxy.CutNext(1, faultproxy.Contains("evalsha"))
		mark := now()
		waitFor(t, "a tick after the resume", 10*time.Second, func() bool { return count(mark) >= 1 })
	}
	fl.stopAll()
	if f.Proxy.Cuts() < 10 {
		t.Fatalf("only %d replies cut, want the 12 armed (or close)", f.Proxy.Cuts())
	}

	ticks := absTicks(t, ctx, q, "j")
	for _, k := range ticks {
		if k > paused.UnixMilli() && k <= resumeStart.UnixMilli() {
			t.Errorf("a task for tick %d, in the pause (%d, %d]", k, paused.UnixMilli(), resumeStart.UnixMilli())
		}
	}
	contiguous(t, ticks, pms, begin.UnixMilli(), pauseStart.UnixMilli(), "before the pause")
	contiguous(t, ticks, pms, resumed.UnixMilli(), 1<<62, "after the resume")
	countedOnce(t, ctx, q, tallies, ticks, pms)
}

// A frozen Redis (SIGSTOP) for 15 ticks, then thawed: the missed ticks
// follow CatchUpAll with MaxCatchUp 3 (at most 4 tasks for them), no
// tick doubles, and the observers count every tick once.
func TestFaultAdvFrozenRedis(t *testing.T) {
	t.Parallel()
	f := testredis.StartFaulty(t)
	ctx := testredis.Ctx(t)
	q := faultyQueue(t, f.Cut)
	direct := f.Server.Client(nil)
	t.Cleanup(func() { _ = direct.Close() })
	period := MinPeriod
	pms := period.Milliseconds()
	j := Job{Name: "j", Schedule: Every(period), CatchUp: CatchUpAll, MaxCatchUp: 3}
	fl := newFleet(t, ctx)
	tallies := make([]*tally, 3)
	for i := range tallies {
		tallies[i] = &tally{}
		fl.start(q, Options{Logger: quietLogger(), Process: fmt.Sprintf("p%d", i), TTL: 6 * time.Second, Observer: tallies[i].observer(t)}, j)
	}
	waitFor(t, "3 tasks", 10*time.Second, func() bool { infos, _ := lookup(ctx, q, "j"); return len(infos) >= 3 })
	before, err := direct.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	f.Server.Freeze()
	// wall time is Redis TIME's clock here: the server is on this machine
	frozenFor := 15 * period
	timer := time.NewTimer(frozenFor)
	<-timer.C
	f.Server.Thaw()
	thawed, err := direct.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "5 ticks after the thaw", 15*time.Second, func() bool {
		infos, _ := lookup(ctx, q, "j")
		n := 0
		for _, in := range infos {
			if in.When.After(thawed) {
				n++
			}
		}
		return n >= 5
	})
	fl.stopAll()
	ticks := absTicks(t, ctx, q, "j")
	inGap := 0
	for _, k := range ticks {
		if k > before.UnixMilli()+pms && k <= thawed.UnixMilli()-pms {
			inGap++
		}
	}
	if inGap > 4 {
		t.Errorf("%d tasks for ticks while Redis was frozen, want at most MaxCatchUp+1 = 4", inGap)
	}
	contiguous(t, ticks, pms, thawed.UnixMilli(), 1<<62, "after the thaw")
	countedOnce(t, ctx, q, tallies, ticks, pms)
}
