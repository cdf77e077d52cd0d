package budget_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/testredis"
)

// TestObserverExpiredThenReleased: an order whose hold ended unpaid is
// one OnHoldExpired, also when checkout's Release takes its report
// before the expiry task's Expire does.
func TestObserverExpiredThenReleased(t *testing.T) {
	b := testredis.Mini(t)
	ctx := testredis.Ctx(t)
	t0 := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	b.Mini.SetTime(t0)
	q, err := delay.New(b.Client, "orders", delay.Options{Prefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	var expired atomic.Int64
	bg := newBudget(t, ctx, b, budget.Options{Expiry: q, Observer: budget.Observer{OnHoldExpired: func(string) { expired.Add(1) }}}, capPromo(5, false))
	if _, err := bg.Reserve(ctx, budget.Request{Order: "o", Lines: line("p", 1, 0), Hold: time.Minute}); err != nil {
		t.Fatal(err)
	}
	b.Mini.SetTime(t0.Add(2 * time.Minute))
	if st, err := bg.Release(ctx, "o"); err != nil || st != budget.Expired {
		t.Fatalf("release of an ended hold: %s %v", st, err)
	}
	if e, err := bg.Expire(ctx, "o"); err != nil || e.State != budget.Expired {
		t.Fatalf("expire: %+v %v", e, err)
	}
	if n := expired.Load(); n != 1 {
		t.Fatalf("one expired order, released then expired: %d OnHoldExpired", n)
	}
}

// TestFaultObserverExpireCutReply: Expire's reply is cut after its script
// took the report; go-redis sends it again. The order is still one
// OnHoldExpired and the call answers First.
func TestFaultObserverExpireCutReply(t *testing.T) {
	f := testredis.StartFaulty(t)
	ctx := testredis.Ctx(t)
	b := &testredis.Backend{Client: f.Cut, Prefix: testredis.Prefix(t)}
	q, err := delay.New(b.Client, "orders", delay.Options{Prefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	var expired atomic.Int64
	bg := newBudget(t, ctx, b, budget.Options{Expiry: q, Observer: budget.Observer{OnHoldExpired: func(string) { expired.Add(1) }}}, capPromo(5, false))
	if _, err := bg.Expire(ctx, "none"); !errors.Is(err, budget.ErrNotFound) { // loads the script
		t.Fatalf("expire of no order: %v", err)
	}
	if _, err := bg.Reserve(ctx, budget.Request{Order: "o", Lines: line("p", 1, 0), Hold: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		o, err := bg.Order(ctx, "o")
		if err != nil {
			t.Fatal(err)
		}
		if o.State == budget.Expired {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the 1ms hold did not end within 5s")
		}
	}
	f.Proxy.CutNext(1, faultproxy.Contains("EVALSHA"))
	e, err := bg.Expire(ctx, "o")
	if err != nil || f.Proxy.Cuts() != 1 {
		t.Fatalf("expire: %v, %d cuts", err, f.Proxy.Cuts())
	}
	if n := expired.Load(); n != 1 || !e.First {
		t.Fatalf("one expired order whose Expire reply was cut: %d OnHoldExpired, First %v", n, e.First)
	}
}

// TestFaultObserverExactUnderCuts: 16 goroutines reserve against a cap
// while replies are cut at random (one cut per call at most, so go-redis's
// resend answers): the grants observed equal the uses counted, and the
// refusals observed equal the ErrLimit answers.
func TestFaultObserverExactUnderCuts(t *testing.T) {
	f := testredis.StartFaulty(t)
	ctx := testredis.Ctx(t)
	b := &testredis.Backend{Client: f.Cut, Prefix: testredis.Prefix(t)}
	var grants, refusals atomic.Int64
	const limit = 40
	bg := newBudget(t, ctx, b, budget.Options{Observer: budget.Observer{
		OnGrant:   func(string, string) { grants.Add(1) },
		OnRefusal: func(string, string, string) { refusals.Add(1) },
	}}, capPromo(limit, false))
	if _, err := bg.Remaining(ctx, nil, "p"); err != nil {
		t.Fatal(err)
	}
	var refused, granted atomic.Int64
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 6 {
				if rand.IntN(3) == 0 && f.Proxy.Armed() == 0 {
					f.Proxy.CutNext(1, faultproxy.Contains("EVALSHA"))
				}
				_, err := bg.Reserve(ctx, budget.Request{Order: fmt.Sprintf("o%d-%d", g, i), Lines: line("p", 1, 0), Hold: time.Minute})
				switch {
				case err == nil:
					granted.Add(1)
				case errors.Is(err, budget.ErrLimit):
					refused.Add(1)
				default:
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	in, err := bg.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	used := in.Promotions[0].Caps[0].Used
	if used != limit || granted.Load() != limit || grants.Load() != used || refusals.Load() != refused.Load() {
		t.Fatalf("used %d of %d; %d calls granted, %d grants observed; %d refused, %d refusals observed (%d cuts)",
			used, limit, granted.Load(), grants.Load(), refused.Load(), refusals.Load(), f.Proxy.Cuts())
	}
	t.Logf("%d cuts", f.Proxy.Cuts())
}
