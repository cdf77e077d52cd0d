package periodic

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/testredis"
)

// gateClock is a process clock (Options.Now) that, once armed, blocks
// the skip+1-th call after arming until released: the scheduler's
// goroutine freezes wherever it reads its clock, as a GC pause or a
// SIGSTOP would freeze it.
type gateClock struct {
	mu      sync.Mutex
	armed   bool
	skip    int
	blocked chan struct{} // closed when a call blocks
	release chan struct{}
}

func newGateClock() *gateClock {
	return &gateClock{blocked: make(chan struct{}), release: make(chan struct{})}
}

func (g *gateClock) arm(skip int) {
	g.mu.Lock()
	g.armed, g.skip = true, skip
	g.mu.Unlock()
}

func (g *gateClock) now() time.Time {
	g.mu.Lock()
	block := false
	if g.armed {
		if g.skip == 0 {
			g.armed, block = false, true
		} else {
			g.skip--
		}
	}
	g.mu.Unlock()
	if block {
		close(g.blocked)
		<-g.release
	}
	return time.Now()
}

// A process frozen at any point of its loop (its clock read blocks)
// while the job goes on in another process, is then undeclared there
// and forgotten: when it thaws, it enqueues none of the ticks handled
// before the Forget (their tasks cancelled meanwhile, so only the guard
// could stop it) and no catch-up of the ticks nobody handled after.
func TestAdvFrozenThroughForget(t *testing.T) {
	t.Parallel()
	for skip := range 4 {
		t.Run(fmt.Sprintf("frozen at clock read %d", skip), func(t *testing.T) {
			b := testredis.Redis(t)
			ctx := testredis.Ctx(t)
			q := newQueue(t, b)
			period := MinPeriod
			j := Job{Name: "j", Schedule: Every(period), CatchUp: CatchUpAll, MaxCatchUp: MaxCatchUp}
			f := newFleet(t, ctx)
			g := newGateClock()
			frozenStop := f.start(q, Options{Logger: quietLogger(), Process: "frozen", TTL: 600 * time.Millisecond, Now: g.now}, j)
			otherStop := f.start(q, Options{Logger: quietLogger(), Process: "other", TTL: 600 * time.Millisecond}, j)
			waitFor(t, "3 tasks", 10*time.Second, func() bool { infos, _ := lookup(ctx, q, "j"); return len(infos) >= 3 })
			g.arm(skip)
			select {
			case <-g.blocked:
			case <-time.After(10 * time.Second):
				t.Fatal("the frozen process never read its clock")
			}
			mark := redisNow(t, ctx, b)
			waitFor(t, "ticks from the other process", 10*time.Second, func() bool {
				jobs, err := List(ctx, q)
				return err == nil && len(jobs) == 1 && jobs[0].Last.After(mark.Add(5*period))
			})
			otherStop()
			waitFor(t, "no live declaration", 10*time.Second, func() bool {
				jobs, err := List(ctx, q)
				return err == nil && len(jobs) == 1 && len(jobs[0].Definitions) == 0
			})
			jobs, err := List(ctx, q)
			if err != nil || len(jobs) != 1 {
				t.Fatalf("List: %+v %v", jobs, err)
			}
			guard := jobs[0].Last.UnixMilli()
			if err := Forget(ctx, q, "j"); err != nil {
				t.Fatalf("Forget with no live declaration: %v", err)
			}
			// the handled ticks' tasks go, as if acked and forgotten
			if _, err := q.Cancel(ctx, delay.Selector{Key: "j"}); err != nil {
				t.Fatal(err)
			}
			// ticks pass with nobody: not to be caught up
			waitFor(t, "ticks with nobody", 10*time.Second, func() bool {
				return redisNow(t, ctx, b).After(time.UnixMilli(guard).Add(4 * period))
			})
			thawed := redisNow(t, ctx, b)
			close(g.release)
			waitFor(t, "3 ticks from the thawed process", 10*time.Second, func() bool {
				infos, _ := lookup(ctx, q, "j")
				return len(infos) >= 3
			})
			frozenStop()
			for _, k := range absTicks(t, ctx, q, "j") {
				if k <= guard {
					t.Errorf("tick %d enqueued again after the Forget (guard was %d)", k, guard)
				} else if k < thawed.UnixMilli()-period.Milliseconds() {
					t.Errorf("tick %d caught up from before the thaw at %d", k, thawed.UnixMilli())
				}
			}
		})
	}
}
