package periodic

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/soak"
	"github.com/tierset/tierset/internal/testredis"
)

// Environment of a scheduler child process (TestSchedulerChildProcess).
const (
	envChild       = "TIERSET_PERIODIC_CHILD"
	envChildAddr   = "TIERSET_PERIODIC_ADDR"
	envChildPrefix = "TIERSET_PERIODIC_PREFIX"
	envChildPeriod = "TIERSET_PERIODIC_PERIOD"
	envChildSkew   = "TIERSET_PERIODIC_SKEW"
)

// TestSchedulerChildProcess is a process of TestFaultTicksExactlyOnce: it
// declares the job "tick" (every period, catch-up all) through the fault
// proxy, on a process clock skewed by the given amount, and runs until
// it is killed.
func TestSchedulerChildProcess(t *testing.T) {
	if os.Getenv(envChild) != "1" {
		t.Skip("the child process of TestFaultTicksExactlyOnce; runs only when it starts it")
	}
	period, _ := time.ParseDuration(os.Getenv(envChildPeriod))
	skew, _ := time.ParseDuration(os.Getenv(envChildSkew))
	now := func() time.Time { return time.Now().Add(skew) }
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(envChildAddr), ContextTimeoutEnabled: true})
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	q, err := delay.New(rdb, "q", delay.Options{Prefix: os.Getenv(envChildPrefix), Now: now, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(q, Options{Now: now, TTL: 2 * time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add(Job{Name: "tick", Schedule: Every(period), CatchUp: CatchUpAll, MaxCatchUp: MaxCatchUp}); err != nil {
		t.Fatal(err)
	}
	// runs until the parent kills it
	_ = s.Run(context.Background())
}

// handled is what the parent's worker saw: per tick (Unix ms), the IDs
// of its tasks, and each task's due time.
type handled struct {
	mu  sync.Mutex
	ids map[int64]map[string]bool
	bad []string
}

func (h *handled) handle(_ context.Context, tk *delay.Task) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	ms, err := strconv.ParseInt(tk.Token, 10, 64)
	if err != nil || tk.Key != "tick" {
		h.bad = append(h.bad, fmt.Sprintf("task %s: key %q token %q", tk.ID, tk.Key, tk.Token))
		return nil
	}
	if !tk.Due.Equal(time.UnixMilli(ms)) {
		h.bad = append(h.bad, fmt.Sprintf("task %s of tick %d due %v, not at its tick", tk.ID, ms, tk.Due))
	}
	if h.ids[ms] == nil {
		h.ids[ms] = map[string]bool{}
	}
	h.ids[ms][tk.ID] = true
	return nil
}

// upTo reports whether every tick from first through last was handled.
func (h *handled) upTo(first, last int64, period time.Duration) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ms := first; ms <= last; ms += period.Milliseconds() {
		if len(h.ids[ms]) == 0 {
			return false
		}
	}
	return true
}

func (h *handled) first() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var f int64
	for ms := range h.ids {
		if f == 0 || ms < f {
			f = ms
		}
	}
	return f
}

// TestFaultTicksExactlyOnce: n scheduler processes declare the same job,
// each on a process clock skewed by -10 s, 0 or +10 s, while processes are
// SIGKILLed and started again, Redis (append-only, fsync always) is
// killed and restarted, and replies of the scripts are cut (go-redis
// sends them again). A worker on a direct client acks every task, so no
// task outlives its tick: only the guard keeps a late process from
// enqueuing a tick again. Every tick of the run has exactly one task, due
// at its tick by Redis TIME, with no gap. The fast run is 4 processes,
// 100 ms ticks, 30 ticks; the soak is 10 processes, 1 s ticks, 60 ticks.
func TestFaultTicksExactlyOnce(t *testing.T) {
	t.Parallel()
	procs := soak.Pick(10, 4)
	period := soak.Pick(time.Second, 100*time.Millisecond)
	ticks := soak.Pick(60, 30)
	f := testredis.StartFaulty(t, "--appendonly", "yes", "--appendfsync", "always")
	prefix := testredis.Prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(ticks)*period+2*time.Minute)
	defer cancel()
	direct := f.Server.Client(nil)

	var logs logBuf
	children := make([]*exec.Cmd, procs)
	start := func(i int) {
		t.Helper()
		skew := time.Duration(i%3-1) * 10 * time.Second
		cmd := exec.Command(os.Args[0], "-test.run=^TestSchedulerChildProcess$", "-test.count=1")
		cmd.Env = testredis.ChildEnv(envChild+"=1", envChildAddr+"="+f.Proxy.Addr(), envChildPrefix+"="+prefix,
			envChildPeriod+"="+period.String(), envChildSkew+"="+skew.String())
		cmd.Stderr = &logs
		testredis.StartChild(t, cmd)
		children[i] = cmd
	}
	for i := range procs {
		start(i)
	}
	kill := func(i int) {
		_ = children[i].Process.Kill() // SIGKILL
		_ = children[i].Wait()
	}

	qd, err := delay.New(direct, "q", delay.Options{Prefix: prefix, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	h := &handled{ids: map[int64]map[string]bool{}}
	w, err := delay.NewPool(delay.PoolOptions{Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(qd, h.handle, delay.QueueOptions{}); err != nil {
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
			time.Sleep(10 * time.Millisecond)
		}
	}
	poll("first tick handled", 15*time.Second, func() bool { return h.first() != 0 })
	first := h.first()
	last := first + int64(ticks-1)*period.Milliseconds()

	// faults, one every ticks/8 ticks by Redis TIME: SIGKILL and start
	// again a process (five times), restart Redis (once, in the middle),
	// and cut a script reply every 3 ticks. The run lasts its ticks, or
	// longer when a slow machine has not got through the faults by then.
	faults := []string{"kill", "kill", "kill", "redis", "kill", "kill"}
	done, killed, restarted := 0, 0, false
	for n := 1; ; n++ {
		now, err := direct.Time(ctx).Result()
		if err != nil { // Redis restarting
			time.Sleep(period / 4)
			continue
		}
		at := now.UnixMilli()
		if at > last && done == len(faults) {
			last = first + (at-first)/period.Milliseconds()*period.Milliseconds()
			break
		}
		if done < len(faults) && (at-first)/period.Milliseconds() >= int64((done+1)*ticks/8) {
			switch faults[done] {
			case "kill":
				i := killed % procs
				kill(i)
				start(i)
				killed++
			case "redis":
				f.Server.Restart()
				restarted = true
			}
			done++
		}
		if n%3 == 0 {
			f.Proxy.CutNext(1, faultproxy.Contains("evalsha"))
		}
		time.Sleep(period)
	}
	if !restarted || killed != 5 {
		t.Fatalf("faults: Redis restarted %v, %d processes killed; want a restart and 5", restarted, killed)
	}
	poll("every tick of the run handled", 30*time.Second+10*period, func() bool { return h.upTo(first, last, period) })
	for i := range procs {
		kill(i)
	}

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
	inRun := 0
	for _, k := range ms {
		if (k-first)%period.Milliseconds() != 0 {
			t.Errorf("task at %d: not a tick of the schedule", k)
		}
		if n := len(h.ids[k]); n != 1 {
			t.Errorf("tick %d: %d tasks, want 1", k, n)
		}
		if k <= last {
			inRun++
		}
	}
	if want := int((last-first)/period.Milliseconds()) + 1; inRun != want || inRun < ticks {
		t.Errorf("%d ticks in the run, want %d (at least %d)", inRun, want, ticks)
	}
	t.Logf("%d processes, %v ticks: %d ticks, %d processes SIGKILLed, Redis restarted, %d replies cut",
		procs, period, inRun, killed, f.Proxy.Cuts())
}
