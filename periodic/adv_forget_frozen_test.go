package periodic

import (
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

// A process frozen through a Forget (its declaration lapsed, the job's
// state deleted) must not enqueue again a tick another process handled
// before the Forget. Two shapes TestForgetThenFrozenProcess does not
// cover: the process froze before its first tick (it knows no guard),
// and it froze inside a declaration, between reading Redis TIME and
// writing (its "now" is from before the Forget).
func TestAdvForgetFrozenShapes(t *testing.T) {
	for _, tc := range []struct {
		name string
		// freezeInDeclare: the process's 2nd pass blocks on its third
		// clock read (after the declaration's TIME) until after Forget.
		freezeInDeclare bool
	}{
		{"frozen before its first tick", false},
		{"frozen inside a declaration", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := testredis.Mini(t)
			ctx := testredis.Ctx(t)
			q := newQueue(t, b)
			j := Job{Name: "j", Schedule: Every(time.Second), CatchUp: CatchUpAll}
			g := newGateClock()
			at := func(ms int64) { b.Mini.SetTime(t0.Add(time.Duration(ms) * time.Millisecond)) }
			at(100)
			frozen := newStepper(t, q, Options{Logger: quietLogger(), Process: "frozen", TTL: 3 * time.Second, Now: g.now}, j)
			frozen.step(ctx)
			var thawed chan struct{}
			if tc.freezeInDeclare {
				at(1000)
				frozen.step(ctx) // tick 1 s: it knows a guard
				at(1500)
				g.arm(2) // pass's clock read, declare's, then the one after TIME
				thawed = make(chan struct{})
				go func() { defer close(thawed); frozen.step(ctx) }()
				select {
				case <-g.blocked:
				case <-time.After(10 * time.Second):
					t.Fatal("the frozen process did not block")
				}
			}
			other := newStepper(t, q, Options{Logger: quietLogger(), Process: "other", TTL: 3 * time.Second}, j)
			var handled []int64
			for _, ms := range []int64{2000, 3000, 4000, 5000} {
				at(ms)
				other.step(ctx)
				handled = append(handled, drain(t, ctx, q)...)
			}
			other.r.undeclare(ctx)
			at(5500)
			if err := Forget(ctx, q, "j"); err != nil {
				t.Fatalf("Forget: %v", err)
			}
			at(6500)
			if thawed != nil {
				close(g.release)
				<-thawed
			}
			var after []int64
			for _, ms := range []int64{6500, 7000} {
				at(ms)
				frozen.step(ctx)
				after = append(after, drain(t, ctx, q)...)
			}
			for _, k := range after {
				for _, h := range handled {
					if k == h {
						t.Errorf("tick %d ms enqueued again after the Forget (handled before it: %v)", k, handled)
					}
				}
			}
			if !equalInts(after, []int64{7000}) {
				t.Errorf("after the thaw: ticks %v, want 7000 alone (its next tick)", after)
			}
		})
	}
}
