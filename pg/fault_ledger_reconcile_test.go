package pg

import (
	"fmt"
	"testing"
	"time"

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
