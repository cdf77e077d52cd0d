package pg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/faultproxy"
)

// grantRest reserves n orders one after another (name, then first.. on)
// and returns how many were granted; any error but the cap's fails t.
func (e *ledgerEnv) grantRest(t *testing.T, ctx context.Context, name string, first, n int) (granted int) {
	t.Helper()
	for i := first; i < first+n; i++ {
		switch err := e.reserve(ctx, fmt.Sprint(name, i), i); {
		case err == nil:
			granted++
		case !errors.Is(err, budget.ErrLimit):
			t.Fatal(err)
		}
	}
	return granted
}

// rush is checkout at its busiest: n customers (from first) try to
// reserve at once; it returns how many were granted. Any error but the
// cap's (or ErrLost, when lost is set) is reported.
func (e *ledgerEnv) rush(t *testing.T, ctx context.Context, first, n int, lost bool) (granted int) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var bad error
	for i := first; i < first+n; i++ {
		wg.Go(func() {
			err := e.reserve(ctx, fmt.Sprint("rush", i), i)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				granted++
			case errors.Is(err, budget.ErrLimit), lost && errors.Is(err, budget.ErrLost):
			default:
				bad = err
			}
		})
	}
	wg.Wait()
	if bad != nil {
		t.Fatalf("rush: %v", bad)
	}
	return granted
}

// TestFaultLedgerRelayCut cuts the path from the ledger to Redis between
// the ledger write and the Redis confirm: every confirm's reply is cut
// (the script may have run; the connection dies), so every task fails and
// stays pending while checkout rushes; then Redis loses everything
// (FLUSHDB of its private server) with tasks still pending. Throughout,
// no grant passes the cap (the holds of orders paid in the ledger keep
// counting until their confirm lands), and once the path is back and the
// ledger reconciled, Redis counts exactly the ledger plus the live holds.
func TestFaultLedgerRelayCut(t *testing.T) {
	e := newLedgerEnv(t)
	ctx := testCtx(t, 2*time.Minute)
	// 8 customers reserve; 6 pay, 2 payments roll back and checkout
	// releases their holds.
	for i := range 8 {
		if err := e.reserve(ctx, fmt.Sprint("o", i), i); err != nil {
			t.Fatal(err)
		}
		if _, err := e.pay(ctx, fmt.Sprint("o", i), i, i < 6); err != nil {
			t.Fatal(err)
		}
		if i >= 6 {
			if _, err := e.shop.Release(ctx, fmt.Sprint("o", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	const paid = 6

	// The cut: every request of the ledger's Redis client loses its reply.
	e.f.Proxy.CutNext(1<<20, faultproxy.Any)
	applied, err := e.drain(ctx)
	if err == nil || len(applied) != 0 {
		t.Fatalf("drain through the cut: %+v %v (want every Apply to fail)", applied, err)
	}
	if n := countRows(t, e.ob, `state IN ('new', 'relayed')`); n != paid {
		t.Fatalf("%d confirm tasks pending through the cut, want %d", n, paid)
	}
	// The paid orders' holds still count: the rush gets only the rest.
	if g := e.rush(t, ctx, 100, 30, false); g != ledgerCap-paid {
		t.Fatalf("during the cut %d granted, want %d (cap %d, %d paid)", g, ledgerCap-paid, ledgerCap, paid)
	}
	if u := e.used(t, ctx); u != ledgerCap {
		t.Fatalf("during the cut Redis counts %d, want the cap %d", u, ledgerCap)
	}

	// The path comes back; the retried tasks confirm (again: a cut reply
	// may have hidden a confirm that ran).
	e.f.Proxy.CutNext(0, nil)
	cuts := e.f.Proxy.Cuts()
	deadline := time.Now().Add(30 * time.Second)
	for countRows(t, e.ob, `state IN ('new', 'relayed')`) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("confirm tasks still pending 30s after the cut ended")
		}
		if _, err := e.drain(ctx); err != nil {
			t.Fatalf("drain after the cut: %v", err)
		}
	}
	if u := e.used(t, ctx); u != ledgerCap {
		t.Fatalf("after the cut Redis counts %d, want %d (%d paid + %d held)", u, ledgerCap, paid, ledgerCap-paid)
	}

	// Redis loses everything (its private server flushed) while two more
	// payments are recorded and their tasks are relayed but not applied.
	for i := 100; i < 102; i++ {
		if _, err := e.pay(ctx, fmt.Sprint("rush", i), i, true); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.ob.RelayOnce(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if err := e.direct.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if g := e.rush(t, ctx, 200, 30, true); g != 0 {
		t.Fatalf("after the flush %d granted before any reconcile, want 0", g)
	}
	// Compensation: the outbox puts its lost tasks back; Apply finds the
	// orders gone and reconciles from the ledger.
	if _, err := e.ob.Reconcile(ctx, time.Now().Add(time.Hour), delay.ReconcileOptions{}); err != nil {
		t.Fatal(err)
	}
	applied, err = e.drain(ctx)
	if err != nil || len(applied) != 2 || !applied[0].Reconciled {
		t.Fatalf("drain after the flush: %+v %v (want 2, reconciled)", applied, err)
	}
	ledger := e.ledgerRows(t, ctx)
	if ledger != paid+2 {
		t.Fatalf("ledger has %d rows, want %d", ledger, paid+2)
	}
	if u := e.used(t, ctx); u != int64(ledger) {
		t.Fatalf("after the flush and reconcile Redis counts %d, the ledger %d", u, ledger)
	}
	if g := e.rush(t, ctx, 300, 30, false); g != ledgerCap-ledger {
		t.Fatalf("after reconciling %d granted, want %d", g, ledgerCap-ledger)
	}
	if u := e.used(t, ctx); u != ledgerCap {
		t.Fatalf("at the end Redis counts %d, want the cap", u)
	}
	t.Logf("ledger relay cut: %d replies cut, %d paid before the flush, %d after; cap %d never passed", cuts, paid, 2, ledgerCap)
}
