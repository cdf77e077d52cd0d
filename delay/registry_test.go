package delay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

// A running pool is listed with its lines, weights, caps and running
// handlers; it leaves the list when Run returns; Health tells a queue
// with no live worker from one whose workers are behind.
func TestPoolRegistry(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		q := namedQ(t, b, "reg-a", Options{})
		other := namedQ(t, b, "reg-b", Options{})
		mustEnqueue(t, ctx, q, Job{Key: "first"})
		mustEnqueue(t, ctx, q, Job{Key: "second"})
		waitFor(t, 5*time.Second, "a task due", func() bool {
			st, err := q.Stats(ctx)
			return err == nil && st.Ready == 2
		})
		h, err := q.Health(ctx, time.Hour)
		if err != nil || h.Verdict != VerdictNoWorker || len(h.Workers) != 0 {
			t.Fatalf("before any worker: %v %+v", err, h)
		}
		release := make(chan struct{})
		// 1 s: an entry lives 3 s without a refresh, which a loaded machine
		// does not delay by that much
		p, _ := NewPool(PoolOptions{Concurrency: 1, Heartbeat: time.Second, ID: "reg-pool"})
		// no prefetch: the waiting task stays due, where Health sees it
		if err := p.Add(q, func(ctx context.Context, _ *Task) error { <-release; return nil }, QueueOptions{Weight: 3, MaxConcurrent: 1, Prefetch: -1}); err != nil {
			t.Fatal(err)
		}
		if err := p.Add(other, func(context.Context, *Task) error { return nil }, QueueOptions{}); err != nil {
			t.Fatal(err)
		}
		stop := runFunc(t, p.Run)
		var w WorkerInfo
		waitFor(t, 5*time.Second, "the pool listed with one handler running", func() bool {
			ws, err := q.Workers(ctx)
			if err != nil || len(ws) != 1 {
				return false
			}
			w = ws[0]
			return w.Running == 1
		})
		if w.ID != "reg-pool" || w.PID != os.Getpid() || w.Concurrency != 1 || w.Mode != "weighted" ||
			len(w.Lines) != 2 || w.Lines[0].Weight != 3 || w.Lines[0].MaxConcurrent != 1 ||
			w.Lines[0].Running != 1 || !w.Serves("reg-b") || w.Serves("reg-c") ||
			time.Duration(w.Interval) != time.Second || w.Started.IsZero() || w.Release != workerRelease {
			t.Fatalf("entry %+v", w)
		}
		// one task runs (blocked), one waits: the worker is behind
		if h, err := q.Health(ctx, 0); err != nil || h.Verdict != VerdictBehind {
			t.Fatalf("with a busy worker: %v %v", err, h.Verdict)
		}
		close(release)
		waitFor(t, 5*time.Second, "both handled", func() bool { return p.Stats()[0].Handled == 2 })
		if h, err := q.Health(ctx, 0); err != nil || h.Verdict != VerdictIdle {
			t.Fatalf("drained: %v %v", err, h.Verdict)
		}
		_ = stop()
		if ws, err := ListWorkers(ctx, b.Client, b.Prefix); err != nil || len(ws) != 0 {
			t.Fatalf("after Run returned: %v %+v", err, ws)
		}
	})
}

// A SIGKILLed worker process leaves the list within 3 heartbeat
// intervals of the kill, by its entry's TTL alone.
func TestFaultHeartbeatKilledWorker(t *testing.T) {
	t.Parallel()
	b := testredis.Redis(t) // a real child process needs a real server
	ctx := testCtx(t)
	const beat = 300 * time.Millisecond
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = testredis.ChildEnv(envHelper+"=1", envHelperPrefix+"="+b.Prefix, envHelperBeat+"="+beat.String())
	cmd.Stderr = os.Stderr
	testredis.StartChild(t, cmd)
	listed := func() []WorkerInfo {
		ws, err := ListWorkers(ctx, b.Client, b.Prefix)
		if err != nil {
			t.Errorf("ListWorkers: %v", err)
		}
		return ws
	}
	waitFor(t, 20*time.Second, "the child listed", func() bool { return len(listed()) == 1 })
	w := listed()[0]
	if w.PID != cmd.Process.Pid || !w.Serves("crash") {
		t.Fatalf("entry %+v, child pid %d", w, cmd.Process.Pid)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	// What Redis will do: the entry's remaining TTL, read right after the
	// kill, is at most 3 intervals (it runs from the last refresh, before
	// the kill), and nothing refreshes it any more.
	ttl, err := b.Client.PTTL(ctx, b.Prefix+":{workers}:w:"+w.ID).Result()
	if err != nil || ttl <= 0 || ttl > 3*beat {
		t.Fatalf("entry TTL right after the kill: %v %v, want (0, %v]", ttl, err, 3*beat)
	}
	waitFor(t, 10*beat, "the killed child gone from the list", func() bool { return len(listed()) == 0 })
	gone := time.Since(killed)
	t.Logf("heartbeat %v: entry TTL %v at the kill; the killed worker left the list %v after SIGKILL (as seen by a 5 ms poll)",
		beat, ttl, gone.Round(time.Millisecond))
	// The poll itself runs late on a loaded machine: at load averages of
	// 30-46 on 2 cores it saw the entry gone up to 865 ms after its TTL,
	// so 2 s of slack; the bound the library owns is the TTL, checked
	// exactly above.
	if gone > ttl+2*time.Second {
		t.Fatalf("gone %v after the kill, TTL was %v", gone, ttl)
	}
	if n, _ := b.Client.ZCard(ctx, b.Prefix+":{workers}:live").Result(); n != 0 {
		t.Fatalf("%d IDs left in the live set after listing", n)
	}
}

// Heartbeat's extremes: below MinHeartbeat (a unit slip such as
// Heartbeat: 5, whose 15 ns TTL Redis refuses, beat in a busy loop) is
// ErrInvalid; a huge one (3 intervals past math.MaxInt64 ns wrapped
// negative) registers with a TTL saturated at math.MaxInt64 ns.
func TestRegistryHeartbeatBounds(t *testing.T) {
	t.Parallel()
	h := func(context.Context, *Task) error { return nil }
	for _, beat := range []time.Duration{1, 5, MinHeartbeat - 1} {
		if _, err := NewPool(PoolOptions{Heartbeat: beat}); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewPool(Heartbeat %v): %v, want ErrInvalid", beat, err)
		}
		q, err := New(testredis.Mini(t).Client, "q", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := newWorker(q, h, workerOpts{Heartbeat: beat}); !errors.Is(err, ErrInvalid) {
			t.Errorf("newWorker(Heartbeat %v): %v, want ErrInvalid", beat, err)
		}
	}
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		for i, tc := range []struct {
			beat time.Duration
			ttl  time.Duration // at least
		}{
			{MinHeartbeat, 0},
			{100 * 365 * 24 * time.Hour, 24 * time.Hour},
			{math.MaxInt64, 24 * time.Hour},
		} {
			t.Run(tc.beat.String(), func(t *testing.T) {
				t.Parallel()
				q := namedQ(t, b, fmt.Sprintf("beat-bounds-%d", i), Options{})
				p, err := NewPool(PoolOptions{Concurrency: 1, Heartbeat: tc.beat})
				if err != nil {
					t.Fatalf("NewPool: %v", err)
				}
				if err := p.Add(q, h, QueueOptions{}); err != nil {
					t.Fatal(err)
				}
				stop := runFunc(t, p.Run)
				_, info := registryKeys(b.Prefix)
				waitFor(t, 5*time.Second, "the pool listed", func() bool {
					ttl, err := b.Client.PTTL(ctx, info+p.ID()).Result()
					return err == nil && ttl > tc.ttl && listedOn(ctx, q)
				})
				if err := stop(); !errors.Is(err, context.Canceled) {
					t.Fatalf("Run: %v", err)
				}
			})
		}
	})
}

// TestWorkerEntryJSON: the stored registry entry keeps its durations as Go
// duration strings, as every version writes and reads them, so pools of
// this version and of v0.1.0 list each other.
func TestWorkerEntryJSON(t *testing.T) {
	t.Parallel()
	info := WorkerInfo{ID: "p1", Mode: "weighted", Concurrency: 8, Interval: 5 * time.Second}
	b, err := json.Marshal(workerEntry{WorkerInfo: info, Interval: jsonDuration(info.Interval)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"interval":"5s"`) || strings.Contains(string(b), `"age"`) {
		t.Fatalf("stored entry %s, want interval \"5s\" and no age", b)
	}
	old := `{"id":"p0","host":"h","pid":1,"mode":"strict","concurrency":4,"running":0,"lines":[],` +
		`"started":"2025-01-01T00:00:00Z","interval":"250ms","version":"v0.1.0"}`
	var e workerEntry
	if err := json.Unmarshal([]byte(old), &e); err != nil {
		t.Fatal(err)
	}
	if e.ID != "p0" || e.Mode != "strict" || time.Duration(e.Interval) != 250*time.Millisecond {
		t.Fatalf("read %+v (interval %v) from a v0.1.0 entry", e.WorkerInfo, time.Duration(e.Interval))
	}
}
