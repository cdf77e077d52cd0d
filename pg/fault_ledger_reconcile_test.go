package pg

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/faultproxy"
)

// TestFaultLedgerReconcileCut: a Reconcile whose rebuild steps lose
// their replies (the step ran; go-redis sends it again on a new
// connection). Reconcile must still succeed and the counters end equal
// to the ledger: a step sent twice must not count twice.
func TestFaultLedgerReconcileCut(t *testing.T) {
	e := newLedgerEnv(t)
	ctx := testCtx(t, time.Minute)
	const paid = 3
	for i := range paid {
		if err := e.reserve(ctx, fmt.Sprint("o", i), i); err != nil {
			t.Fatal(err)
		}
		if _, err := e.pay(ctx, fmt.Sprint("o", i), i, true); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.drain(ctx); err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{"begin", "add", "end"} {
		t.Run(step, func(t *testing.T) {
			e.f.Proxy.CutNext(1, faultproxy.Contains("\r\n"+step+"\r\n"))
			_, err := e.ledger.Reconcile(ctx)
			cut := e.f.Proxy.Armed() == 0
			e.f.Proxy.CutNext(0, nil)
			if !cut {
				t.Fatalf("no %s step was cut", step)
			}
			if err != nil {
				t.Fatalf("Reconcile with a cut %s step: %v", step, err)
			}
			if u := e.used(t, ctx); u != paid {
				t.Fatalf("after a cut %s step Redis counts %d, the ledger %d", step, u, paid)
			}
		})
	}
}

// TestFaultLedgerReconcileDuringCheckout: Reconcile runs again and again
// while checkouts reserve and pay and their confirm tasks are applied.
// Reservations answer ErrLost while a rebuild runs (checkout tries
// again); no more than the cap is ever granted, exactly the cap is in
// the end, and Redis counts exactly the ledger.
func TestFaultLedgerReconcileDuringCheckout(t *testing.T) {
	e := newLedgerEnv(t)
	ctx := testCtx(t, 2*time.Minute)
	const customers = 30
	var granted, reconciles atomic.Int64
	var mu sync.Mutex
	var bad []error
	fail := func(err error) {
		mu.Lock()
		bad = append(bad, err)
		mu.Unlock()
	}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { // the reconciler
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := e.ledger.Reconcile(ctx); err != nil {
				fail(fmt.Errorf("Reconcile: %w", err))
				return
			}
			reconciles.Add(1)
		}
	})
	bg.Go(func() { // the delay worker
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := e.drain(ctx); err != nil {
				fail(fmt.Errorf("drain: %w", err))
				return
			}
		}
	})
	var checkout sync.WaitGroup
	for w := range 3 {
		checkout.Go(func() {
			for i := w; i < customers; i += 3 {
				order := fmt.Sprint("o", i)
				deadline := time.Now().Add(30 * time.Second)
				err := e.reserve(ctx, order, i)
				for errors.Is(err, budget.ErrLost) && time.Now().Before(deadline) {
					err = e.reserve(ctx, order, i)
				}
				switch {
				case errors.Is(err, budget.ErrLimit):
					continue
				case err != nil:
					fail(fmt.Errorf("reserve %s: %w", order, err))
					return
				}
				if n := granted.Add(1); n > ledgerCap {
					fail(fmt.Errorf("grant %d passes the cap %d", n, ledgerCap))
				}
				if _, err := e.pay(ctx, order, i, true); err != nil {
					fail(fmt.Errorf("pay %s: %w", order, err))
					return
				}
			}
		})
	}
	checkout.Wait()
	close(stop)
	bg.Wait()
	if len(bad) > 0 {
		t.Fatal(errors.Join(bad...))
	}
	deadline := time.Now().Add(30 * time.Second)
	for countRows(t, e.ob, `state IN ('new', 'relayed')`) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("confirm tasks still pending 30s after checkout ended")
		}
		if _, err := e.drain(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if g := granted.Load(); g != ledgerCap {
		t.Fatalf("granted %d, want the cap %d", g, ledgerCap)
	}
	if n, u := e.ledgerRows(t, ctx), e.used(t, ctx); int64(n) != u || n != ledgerCap {
		t.Fatalf("the ledger holds %d, Redis counts %d, want both the cap %d", n, u, ledgerCap)
	}
	t.Logf("%d reconciles during checkout", reconciles.Load())
}
