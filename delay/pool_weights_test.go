package delay

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/soak"
	"github.com/tierset/tierset/internal/testredis"
)

// weightRun is the docs' example pool (Concurrency 16, weights 6:3:1,
// every line backlogged) with the given QueueOptions; clients[i] carries
// line i. It counts n handler starts once every line has started one,
// and returns each line's share of them.
func weightRun(t *testing.T, ctx context.Context, clients []redis.UniversalClient, n int, qo QueueOptions, work time.Duration) []float64 {
	t.Helper()
	weights := []int{6, 3, 1}
	p, err := NewPool(PoolOptions{Concurrency: 16, Heartbeat: -1})
	if err != nil {
		t.Fatal(err)
	}
	prefix := testredis.Prefix(t)
	var seq atomic.Int64
	var begun [3]atomic.Bool
	var allBegun atomic.Bool
	starts := make([]int32, n)
	for i, w := range weights {
		q, err := New(clients[i], fmt.Sprintf("w%d", i), Options{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		// more than the line's share of n, so it stays backlogged
		fillDue(t, ctx, q, n*w/10+n/5+200)
		o := qo
		o.Weight = w
		err = p.Add(q, func(ctx context.Context, tk *Task) error {
			if !allBegun.Load() {
				begun[i].Store(true)
				if !begun[0].Load() || !begun[1].Load() || !begun[2].Load() {
					return nil
				}
				allBegun.Store(true)
			}
			if k := seq.Add(1); k <= int64(n) {
				starts[k-1] = int32(i)
			}
			time.Sleep(work)
			return nil
		}, o)
		if err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	stop := runFunc(t, p.Run)
	waitFor(t, 60*time.Second, fmt.Sprintf("%d starts", n), func() bool { return seq.Load() >= int64(n) })
	_ = stop()
	t.Logf("%d starts counted in %v", n, time.Since(began).Round(time.Millisecond))
	counts := make([]float64, len(weights))
	for _, l := range starts {
		counts[l]++
	}
	for i := range counts {
		counts[i] /= float64(n)
	}
	return counts
}

// The package's own example, as the docs show it: Concurrency 16, weights
// 6:3:1, every line backlogged, default QueueOptions. Each line gets its
// weight's share of the handler starts (within ±10% of it: the starts
// are counted in the handlers, after the pick, so a few swap places, and
// on a loaded machine a take may outlast pendingWait), also
// with 10 ms of latency on the weight-6 line's link, whose takes then
// come back slower than its handlers drain them.
func TestFaultPoolWeightsDefaultOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		latency time.Duration
		n       int // starts counted (the soak counts 20,000)
	}{
		{"local", 0, 2000},
		// its takes bring 16 tasks a round trip: fewer starts
		{"weight-6 line 10ms away", 10 * time.Millisecond, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := testredis.StartFaulty(t)
			direct := f.Server.Client(nil)
			ctx := testCtx(t)
			f.Proxy.SetLatency(tc.latency)
			n := soak.Pick(20000, tc.n)
			got := weightRun(t, ctx, []redis.UniversalClient{f.Cut, direct, direct}, n, QueueOptions{}, time.Millisecond)
			for i, w := range []float64{0.6, 0.3, 0.1} {
				t.Logf("line w%d: share %.4f of %d starts (want %.2f)", i, got[i], n, w)
				if got[i] < w*0.9 || got[i] > w*1.1 {
					t.Errorf("line w%d: share %.4f, want %.2f ±10%%", i, got[i], w)
				}
			}
		})
	}
}

// The wait for a backlogged line's take is bounded: when the weight-6
// line's take hangs (its reply held in the proxy: a frozen server), the
// other line's starts pause for at most pendingWait (plus slack for a
// loaded machine), not for as long as the take hangs.
func TestFaultPoolFrozenLineBounded(t *testing.T) {
	f := testredis.StartFaulty(t)
	direct := f.Server.Client(nil)
	ctx := testCtx(t)
	loadScripts(t, ctx, direct)
	p, err := NewPool(PoolOptions{Concurrency: 4, Heartbeat: -1})
	if err != nil {
		t.Fatal(err)
	}
	prefix := testredis.Prefix(t)
	var mu sync.Mutex
	var starts [2][]time.Time
	for i, c := range []redis.UniversalClient{f.Cut, direct} {
		q, err := New(c, fmt.Sprintf("f%d", i), Options{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		fillDue(t, ctx, q, 3000)
		err = p.Add(q, func(ctx context.Context, tk *Task) error {
			mu.Lock()
			starts[i] = append(starts[i], time.Now())
			mu.Unlock()
			time.Sleep(time.Millisecond)
			return nil
		}, QueueOptions{Weight: []int{6, 1}[i]})
		if err != nil {
			t.Fatal(err)
		}
	}
	stop := runFunc(t, p.Run)
	count := func(i int) int {
		mu.Lock()
		defer mu.Unlock()
		return len(starts[i])
	}
	waitFor(t, 10*time.Second, "both lines started", func() bool { return count(0) > 20 && count(1) > 5 })
	hold := f.Proxy.HoldNext(faultproxy.Contains(scriptTake.Hash()))
	waitFor(t, 10*time.Second, "the frozen line's take held", closedYet(hold.Held()))
	held := time.Now()
	const window = time.Second
	waitFor(t, 10*time.Second, "the window", func() bool { return time.Since(held) > window })
	hold.Release() // a cancel does not end go-redis's read: let the take return
	_ = stop()
	mu.Lock()
	defer mu.Unlock()
	last, gap := held, time.Duration(0)
	for _, at := range starts[1] {
		if at.Before(held) || at.After(held.Add(window)) {
			continue
		}
		gap = max(gap, at.Sub(last))
		last = at
	}
	gap = max(gap, held.Add(window).Sub(last))
	t.Logf("longest pause of the other line's starts in the %v after the hold: %v", window, gap.Round(time.Millisecond))
	if gap > pendingWait+250*time.Millisecond {
		t.Errorf("the other line waited %v for the frozen line, want ≤ pendingWait %v (+250 ms)", gap, pendingWait)
	}
}
