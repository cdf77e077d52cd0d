package budget_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/testredis"
)

// TestFaultRebuildWaitPastReadTimeout: with Options.ReplicaTimeout past
// the client's ReadTimeout and too few replicas, every WAIT outlasts the
// read of its reply, while the script's reply before it came. Each step
// took effect on the master all the same: Rebuild goes on to the end of
// its steps and returns the new epoch with ErrNotReplicated (it
// returned the read's timeout at its first step, leaving the budget
// mid-rebuild). With no retry, and with go-redis sending the script and
// WAIT again (the step is done once).
func TestFaultRebuildWaitPastReadTimeout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		retries int
	}{{"no retry", -1}, {"one retry", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			b := testredis.Redis(t)
			ctx := testredis.Ctx(t)
			const limit = 10
			// Built, and two orders held, without Replicas.
			plain := newBudget(t, ctx, b, budget.Options{}, capPromo(limit, false))
			for _, o := range []string{"held", "live"} {
				if _, err := plain.Reserve(ctx, unknownReq(o)); err != nil {
					t.Fatalf("Reserve %s: %v", o, err)
				}
			}
			opt, err := redis.ParseURL(testredis.URL())
			if err != nil {
				t.Fatal(err)
			}
			opt.ContextTimeoutEnabled, opt.MaxRetries, opt.ReadTimeout = true, tc.retries, 500*time.Millisecond
			c := redis.NewClient(opt)
			t.Cleanup(func() { _ = c.Close() })
			// More replicas than any test server has: WAIT always waits
			// out its timeout, ten times the read's.
			bg := unbuilt(t, &testredis.Backend{Client: c, Prefix: b.Prefix},
				budget.Options{Replicas: 100, ReplicaTimeout: 5 * time.Second}, capPromo(limit, false))
			// The ledger names held (its hold stops counting) and one more:
			// begin, two adds and end.
			at := time.Now()
			reds := []budget.Redemption{
				{Order: "held", Lines: line("p", 1, 0), At: at},
				{Order: "gone", Lines: line("p", 1, 0), At: at},
			}
			epoch, err := bg.Rebuild(ctx, reds)
			if !errors.Is(err, budget.ErrNotReplicated) || epoch == "" {
				t.Fatalf("Rebuild: epoch %q, %v; want an epoch and ErrNotReplicated", epoch, err)
			}
			if left := remaining(t, ctx, bg); left != limit-3 {
				t.Errorf("remaining %d after the rebuild, want %d (held, gone, live)", left, limit-3)
			}
		})
	}
}

// TestFaultReplicasWaitReplyCut: the reply of WAIT is cut on every one
// of go-redis's tries (the script's reply before it comes each time, so
// the script runs four times). Rebuild's first step and a Reserve took
// effect on the master: Rebuild goes on and returns the new epoch with
// ErrNotReplicated (it returned EOF, leaving the budget mid-rebuild),
// and Reserve answers its new hold with ErrNotReplicated (it answered
// ErrUnknown); the counter holds each hold once.
func TestFaultReplicasWaitReplyCut(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(t *testing.T, ctx context.Context, bg *budget.Budget)
	}{
		{"rebuild", func(t *testing.T, ctx context.Context, bg *budget.Budget) {
			t.Helper()
			if ep, err := bg.Rebuild(ctx, nil); !errors.Is(err, budget.ErrNotReplicated) || ep == "" {
				t.Fatalf("Rebuild: epoch %q, %v; want an epoch and ErrNotReplicated", ep, err)
			}
		}},
		{"reserve", func(t *testing.T, ctx context.Context, bg *budget.Budget) {
			t.Helper()
			if res, err := bg.Reserve(ctx, unknownReq("w")); !errors.Is(err, budget.ErrNotReplicated) || !res.New {
				t.Fatalf("Reserve: %+v, %v; want a new hold and ErrNotReplicated", res, err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := testredis.StartFaulty(t)
			ctx := testredis.Ctx(t)
			const limit = 10
			b := &testredis.Backend{Client: f.Cut, Prefix: testredis.Prefix(t)}
			newBudget(t, ctx, b, budget.Options{}, capPromo(limit, false))
			// No replica: WAIT answers 0, in a reply of its own after
			// the script's.
			bg := unbuilt(t, b, budget.Options{Replicas: 1, ReplicaTimeout: 100 * time.Millisecond}, capPromo(limit, false))
			// Both scripts on the server: a try answered NOSCRIPT is not
			// one whose WAIT is under test.
			if _, err := bg.Reserve(ctx, unknownReq("warm")); !errors.Is(err, budget.ErrNotReplicated) {
				t.Fatalf("warm: %v, want ErrNotReplicated", err)
			}
			cut := make(chan struct{}, 4)
			for range 4 { // go-redis's tries: MaxRetries 3
				h := f.Proxy.HoldNextReply(func(b []byte) bool { return string(b) == ":0\r\n" })
				go func() {
					select {
					case <-h.Held():
						cut <- struct{}{} // before the cut the call waits on
						f.Proxy.CutAll()
					case <-ctx.Done():
					}
				}()
			}
			tc.call(t, ctx, bg)
			if len(cut) != 4 {
				t.Fatalf("%d WAIT replies cut, want 4", len(cut))
			}
			if res, err := bg.Reserve(ctx, unknownReq("w")); !errors.Is(err, budget.ErrNotReplicated) || res.New != (tc.name == "rebuild") {
				t.Errorf("Reserve after: %+v, %v; want ErrNotReplicated, New only after the rebuild", res, err)
			}
			if left := remaining(t, ctx, bg); left != limit-2 {
				t.Errorf("remaining %d, want %d (warm, w)", left, limit-2)
			}
		})
	}
}
