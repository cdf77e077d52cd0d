package periodic

import (
	"context"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/soak"
	"github.com/tierset/tierset/internal/testredis"
)

// TestFaultPauseHoldsAcrossProcesses: scheduler processes
// (TestSchedulerChildProcess, 200 ms ticks, catch-up all) run a job; a
// third client pauses it. While paused one process is SIGKILLed and
// started again, another process starts, and Redis (append-only, fsync
// always) restarts: none of them enqueues a tick, for at least N periods
// (the guard, moving, shows the ticks passing). After Resume the ticks
// come again, one task each, with no gap. The fast run is 2 processes
// and 8 paused periods; the soak 4 and 30.
func TestFaultPauseHoldsAcrossProcesses(t *testing.T) {
	t.Parallel()
	if !testredis.HaveServer() {
		t.Skip("no redis-server on PATH: the test restarts its own")
	}
	procs := soak.Pick(4, 2)
	quiet := soak.Pick(30, 8)
	const period = 200 * time.Millisecond
	srv := testredis.StartServer(t, "--appendonly", "yes", "--appendfsync", "always")
	prefix := testredis.Prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute+time.Duration(quiet)*period)
	defer cancel()
	direct := srv.Client(nil) // the operator's client, and the worker's

	var logs logBuf
	var children []*exec.Cmd
	start := func() {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestSchedulerChildProcess$", "-test.count=1")
		cmd.Env = testredis.ChildEnv(envChild+"=1", envChildAddr+"="+srv.Addr(), envChildPrefix+"="+prefix,
			envChildPeriod+"="+period.String(), envChildSkew+"=0s")
		cmd.Stderr = &logs
		testredis.StartChild(t, cmd)
		children = append(children, cmd)
	}
	for range procs {
		start()
	}
	defer func() {
		for _, c := range children {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}()
	q, err := delay.New(direct, "q", delay.Options{Prefix: prefix, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	h := &handled{ids: map[int64]map[string]bool{}}
	w, err := delay.NewPool(delay.PoolOptions{Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(q, h.handle, delay.QueueOptions{}); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	werr := make(chan error, 1)
	go func() { werr <- w.Run(wctx) }()
	defer func() { wcancel(); <-werr }()

	poll := func(what string, within time.Duration, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(within)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v; children's logs:\n%s", what, within, logs.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	redisNow := func() int64 {
		t.Helper()
		for {
			now, err := direct.Time(ctx).Result()
			if err == nil {
				return now.UnixMilli()
			}
			if ctx.Err() != nil {
				t.Fatalf("Redis TIME: %v", err)
			}
			time.Sleep(20 * time.Millisecond) // Redis restarting
		}
	}
	job := func() JobInfo {
		t.Helper()
		for {
			jobs, err := List(ctx, q)
			if err == nil && len(jobs) == 1 {
				return jobs[0]
			}
			if ctx.Err() != nil {
				t.Fatalf("List: %+v %v", jobs, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	poll("three ticks handled", 30*time.Second, func() bool {
		f := h.first()
		return f != 0 && h.upTo(f, f+2*period.Milliseconds(), period)
	})

	if err := Pause(ctx, q, "tick"); err != nil {
		t.Fatal(err)
	}
	paused := redisNow() // a tick after this is judged paused
	// the faults, while paused
	_ = children[0].Process.Kill() // SIGKILL
	_ = children[0].Wait()
	restarted := redisNow()
	start()
	start()
	srv.Restart()
	poll("the two new processes declare", 30*time.Second, func() bool {
		n := 0
		for _, d := range job().Definitions {
			for _, p := range d.Processes {
				if p.Declared.UnixMilli() >= restarted {
					n++
				}
			}
		}
		return n >= 2
	})
	quietFrom := redisNow()
	poll("the paused guard passes N periods", 30*time.Second+time.Duration(quiet)*period, func() bool {
		return job().Last.UnixMilli() >= quietFrom+int64(quiet)*period.Milliseconds()
	})
	upTo := job().Last.UnixMilli() // every tick through it was handled, paused
	if ji := job(); !ji.Paused || ji.PausedSince.UnixMilli() > paused {
		t.Fatalf("after the faults: %+v, want paused since before %d", ji, paused)
	}
	if err := Resume(ctx, q, "tick"); err != nil {
		t.Fatal(err)
	}
	resumed := job().Last.UnixMilli()
	poll("five ticks after the resume", 30*time.Second, func() bool {
		return h.upTo(resumed+period.Milliseconds(), resumed+5*period.Milliseconds(), period)
	})

	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.bad) > 0 {
		t.Fatalf("bad tasks: %s", strings.Join(h.bad, "; "))
	}
	var ms []int64
	for k := range h.ids {
		ms = append(ms, k)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i] < ms[j] })
	for _, k := range ms {
		if k%period.Milliseconds() != 0 {
			t.Errorf("task at %d: not a tick of the schedule", k)
		}
		if n := len(h.ids[k]); n != 1 {
			t.Errorf("tick %d: %d tasks, want 1", k, n)
		}
		if k > paused && k <= upTo {
			t.Errorf("tick %d has a task: paused from %d through %d", k, paused, upTo)
		}
	}
	if n := (upTo - paused) / period.Milliseconds(); n < int64(quiet) {
		t.Errorf("%d periods paused, want at least %d", n, quiet)
	}
	t.Logf("%d processes, one SIGKILLed and started again, one more started, Redis restarted; %d ticks without a task while paused",
		procs, (upTo-paused)/period.Milliseconds())
}
