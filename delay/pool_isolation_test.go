package delay

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/measure"
	"github.com/tierset/tierset/internal/soak"
	"github.com/tierset/tierset/internal/testredis"
)

// A burst of 200,000 due tasks on line A leaves line B, fed at 100
// tasks/s, within 2× of its own p99 lateness with A idle, in one run.
// Lateness is taken in B's handler: the server's clock (local clock plus
// the offset measured to Redis TIME) minus the task's due time, so it
// counts the take, the wait for a handler and the dispatch. A's burst is
// enqueued while A is paused and made due at once by Resume; B's idle
// figure pools the windows before the Resume (A paused, its 200,000 tasks
// waiting) and after A drained, so both sides of the ratio see the same
// machine; B's tasks due while the burst is being enqueued count in
// neither. On the shared 2-core host the idle p99 itself ranged 32-44 ms
// (p50 1.3-1.6 ms) over the first runs, from other processes' load; the
// ratio is what is judged, with a 2 ms floor under the idle figure for a
// quiet machine.
//
// A takes up to 100 tasks a script, as a line tuned for throughput would;
// the pool's SharedBatch (32 by default) caps its scripts while B has work
// due. -delay.shared-batch=-1 runs the same test without the cap, for
// comparison (docs/benchmarks.md).
var isoSharedBatch = flag.Int("delay.shared-batch", 0, "TestPoolLineIsolation's PoolOptions.SharedBatch (0: the default)")

func TestPoolLineIsolation(t *testing.T) {
	soak.Require(t, "enqueues 200,000 tasks, with 3 s idle windows before and after")
	b := testredis.Redis(t)
	// minutes, not testCtx's two: under -race on a loaded machine A's
	// drain alone can take a minute, and the idle window after it as long
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	t.Cleanup(cancel)
	const burst = 200_000
	a := namedQ(t, b, "iso-a", Options{})
	bq := namedQ(t, b, "iso-b", Options{})
	if err := a.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	offset, _, err := measure.ClockOffset(ctx, b.Client)
	if err != nil {
		t.Fatal(err)
	}
	type sample struct {
		due       time.Time
		late, srv time.Duration // srv: at the take (Redis TIME ms)
	}
	var mu sync.Mutex
	var samples []sample
	var aDone atomic.Int64
	p, err := NewPool(PoolOptions{Concurrency: 8, Heartbeat: -1, SharedBatch: *isoSharedBatch})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Add(a, func(context.Context, *Task) error { aDone.Add(1); return nil }, QueueOptions{BatchSize: 100}); err != nil {
		t.Fatal(err)
	}
	if err := p.Add(bq, func(_ context.Context, tk *Task) error {
		late := time.Now().Add(offset).Sub(tk.Due)
		mu.Lock()
		samples = append(samples, sample{tk.Due, late, tk.DeliveredAt.Sub(tk.Due)})
		mu.Unlock()
		return nil
	}, QueueOptions{}); err != nil {
		t.Fatal(err)
	}
	runFunc(t, p.Run)

	// B: 100 tasks/s, each due 20 ms after its enqueue.
	pctx, stopB := context.WithCancel(ctx)
	var produced atomic.Int64
	var prodErr error
	var prod sync.WaitGroup
	prod.Add(1)
	go func() {
		defer prod.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
			}
			// ctx, not pctx: an Enqueue cut short by stopB could be run
			// by the server yet not be counted, and B would then handle
			// one task more than produced
			if _, err := bq.Enqueue(ctx, Job{Key: fmt.Sprintf("b%d", i), When: After(20 * time.Millisecond)}); err != nil {
				prodErr = err
				return
			}
			produced.Add(1)
		}
	}()

	fillDue(t, ctx, a, burst)
	idleFrom := a.ServerNow()   // B's tasks due during the enqueue count in neither window
	time.Sleep(3 * time.Second) // idle window before the burst
	resumed := a.ServerNow()
	if err := a.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	// judged on progress: a drain that stops for 30 s is stuck, a slow one is not
	waitProgress(t, 30*time.Second, "line A drained", func() (int64, bool) { n := aDone.Load(); return n, n == burst })
	drained := a.ServerNow()
	time.Sleep(min(max(3*time.Second, drained.Sub(resumed)), 30*time.Second)) // idle window after it
	stopB()
	prod.Wait()
	if prodErr != nil {
		t.Fatal(prodErr)
	}
	waitFor(t, 10*time.Second, "every B task", func() bool {
		mu.Lock()
		defer mu.Unlock()
		if n := int64(len(samples)); n > produced.Load() {
			t.Fatalf("B handled %d tasks, %d produced", n, produced.Load())
		}
		return int64(len(samples)) == produced.Load()
	})
	// Each window's lateness, and its two parts: at the take (Redis TIME
	// at the take minus due, ms resolution: the taker's timer and the
	// take's wait in the server) and after it (the reply, the buffer, the
	// handler's start).
	var idle, during, idleTake, duringTake, idleAfter, duringAfter measure.Samples
	mu.Lock()
	for _, s := range samples {
		all, take, after := &idle, &idleTake, &idleAfter
		switch {
		case s.due.Before(idleFrom):
			continue
		case !s.due.Before(resumed) && s.due.Before(drained):
			all, take, after = &during, &duringTake, &duringAfter
		}
		all.Add(s.late)
		take.Add(s.srv)
		after.Add(s.late - s.srv)
	}
	mu.Unlock()
	is, ds := idle.Summary(), during.Summary()
	t.Logf("SharedBatch %d", p.o.SharedBatch)
	t.Logf("line A: %d tasks drained in %v (%.0f/s)", burst, drained.Sub(resumed).Round(time.Millisecond), burst/drained.Sub(resumed).Seconds())
	t.Logf("line B at 100/s, A idle:      n=%d p50 %v p99 %v max %v", is.N, is.P50, is.P99, is.Max)
	t.Logf("line B at 100/s, A bursting:  n=%d p50 %v p99 %v max %v (p99 ratio %.2f)", ds.N, ds.P50, ds.P99, ds.Max, float64(ds.P99)/float64(is.P99))
	for _, w := range []struct {
		name        string
		take, after *measure.Samples
	}{{"A idle", &idleTake, &idleAfter}, {"A bursting", &duringTake, &duringAfter}} {
		tk, af := w.take.Summary(), w.after.Summary()
		t.Logf("line B, %s: at the take p50 %v p99 %v; after it p50 %v p99 %v", w.name, tk.P50, tk.P99, af.P50, af.P99)
	}
	if ds.N < 50 {
		t.Fatalf("only %d B tasks during the burst", ds.N)
	}
	// The target is 2× the idle p99. B's extra lateness is its take
	// waiting behind A's scripts in the one server thread, which
	// SharedBatch bounds; on a quiet machine the default meets the target
	// (docs/benchmarks.md, "One line's burst beside another"). On a
	// loaded one, other processes' CPU sets both figures (at load 14-20
	// the idle p99 was 43-153 ms and the burst's up to 291 ms, -race
	// alike), while a B held back by A's backlog is late by A's drain,
	// 5-15 s. So the judged bound is 2× or, past that, 1 s over the idle
	// p99, and a missed 2× target is printed.
	target := 2 * max(is.P99, 2*time.Millisecond)
	bound := max(target, is.P99+time.Second)
	if ds.P99 > target {
		t.Logf("B's p99 during A's burst %v is past the 2× target %v (allowed up to %v)", ds.P99, target, bound)
	}
	if ds.P99 > bound {
		t.Fatalf("B's p99 during A's burst %v > 2 × its idle p99 %v and > idle + 1 s", ds.P99, is.P99)
	}
}
