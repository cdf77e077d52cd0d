package pg

import (
	"errors"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
)

// TestFaultLedgerHoldsEvicted: the holds index (Bholds) is evicted while
// two orders are held, and the ledger reconciled (which counts only the
// holds the index lists). Then one order is paid (its confirm applied)
// and the other released: Redis must count at least the ledger ("an
// evicted holds index overcounts, never under"), and grant no more than
// the rest of the cap.
func TestFaultLedgerHoldsEvicted(t *testing.T) {
	e := newLedgerEnv(t)
	ctx := testCtx(t, time.Minute)
	for i, order := range []string{"paid", "unpaid"} {
		if err := e.reserve(ctx, order, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.direct.Del(ctx, e.shop.Keys()[2]).Err(); err != nil { // the holds index
		t.Fatal(err)
	}
	if _, err := e.ledger.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pay(ctx, "paid", 0, true); err != nil {
		t.Fatal(err)
	}
	applied, err := e.drain(ctx)
	if err != nil || len(applied) != 1 {
		t.Fatalf("drain: %+v %v", applied, err)
	}
	if u := e.used(t, ctx); u < 1 {
		t.Errorf("after the paid order's confirm Redis counts %d, the ledger 1 (Applied %+v)", u, applied[0])
	}
	if _, err := e.shop.Release(ctx, "unpaid"); err != nil {
		t.Fatal(err)
	}
	if u := e.used(t, ctx); u < 1 {
		t.Fatalf("after the unpaid order's release Redis counts %d, the ledger 1", u)
	}
	// What it lets through: the cap less the ledger's one.
	if granted := e.grantRest(t, ctx, "more", 10, 2*ledgerCap); granted != ledgerCap-1 {
		t.Fatalf("granted %d more past the ledger's 1, want %d (cap %d)", granted, ledgerCap-1, ledgerCap)
	}
}

// TestFaultLedgerRecordEvicted: a held order's record is evicted, then
// the order is paid. Its confirm finds no record (ErrNotFound) and
// reconciles: Redis counts the ledger's redemption once (the hold, whose
// deltas went with its record, counts nowhere), and the rest of the cap
// is granted, no more.
func TestFaultLedgerRecordEvicted(t *testing.T) {
	e := newLedgerEnv(t)
	ctx := testCtx(t, time.Minute)
	if err := e.reserve(ctx, "paid", 0); err != nil {
		t.Fatal(err)
	}
	if err := e.direct.Del(ctx, e.shop.Keys()[0]+"o:paid").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pay(ctx, "paid", 0, true); err != nil {
		t.Fatal(err)
	}
	applied, err := e.drain(ctx)
	if err != nil || len(applied) != 1 || !applied[0].Reconciled || !errors.Is(applied[0].Cause, budget.ErrNotFound) {
		t.Fatalf("drain: %+v %v (want reconciled after ErrNotFound)", applied, err)
	}
	if u := e.used(t, ctx); u != 1 {
		t.Fatalf("Redis counts %d, the ledger 1", u)
	}
	if granted := e.grantRest(t, ctx, "more", 10, 2*ledgerCap); granted != ledgerCap-1 {
		t.Fatalf("granted %d more past the ledger's 1, want %d (cap %d)", granted, ledgerCap-1, ledgerCap)
	}
}
