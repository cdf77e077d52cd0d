package pg

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tierset/tierset/budget"
)

// TestLedgerApplyLinesDiffer: the payment's transaction records lines
// other than the ones checkout reserved (the cart changed, a bug). The
// ledger is the truth: once Apply ran, Redis must count what the ledger
// holds, not the reservation.
func TestLedgerApplyLinesDiffer(t *testing.T) {
	e := newLedgerEnv(t)
	ctx := testCtx(t, time.Minute)
	if err := e.reserve(ctx, "o1", 1); err != nil { // 1 use
		t.Fatal(err)
	}
	tx, err := e.ob.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := e.ledger.Confirm(ctx, tx, Redemption{Order: "o1", Attributes: cust(1),
		Lines: []budget.Line{{Promotion: "p", Uses: 2}}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	applied, err := e.drain(ctx)
	if err != nil || len(applied) != 1 {
		t.Fatalf("drain: %+v %v", applied, err)
	}
	if u := e.used(t, ctx); u != 2 {
		t.Fatalf("after Apply Redis counts %d uses, the ledger 2 (Applied %+v)", u, applied[0])
	}
	if !applied[0].Reconciled || !errors.Is(applied[0].Cause, budget.ErrConflict) {
		t.Fatalf("Applied %+v: want Reconciled with a Cause matching budget.ErrConflict", applied[0])
	}
}

// TestLedgerBudgetNameColon: two budgets whose names differ by a colon
// ("a" and "a:b") would share confirm task keys: a's order "b:o" and
// a:b's order "o" are both "budget-confirm:a:b:o", one outbox row, and
// a's ledger owns a:b's tasks. NewLedger refuses such a name.
func TestLedgerBudgetNameColon(t *testing.T) {
	e := newLedgerEnv(t)
	ab, err := budget.New(e.direct, "a:b", budget.Options{Prefix: "shop", Promotions: []budget.Promotion{promo}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := budget.New(e.direct, "a", budget.Options{Prefix: "shop", Promotions: []budget.Promotion{promo}})
	if err != nil {
		t.Fatal(err)
	}
	la, err := NewLedger(e.ob.db, e.ob.schema, a, e.ob)
	if err != nil {
		t.Fatal(err)
	}
	lab, err := NewLedger(e.ob.db, e.ob.schema, ab, e.ob)
	if errors.Is(err, &ValidationError{Field: "options"}) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if k := la.TaskKey("b:o"); k == lab.TaskKey("o") || la.Owns(lab.TaskKey("o")) {
		t.Fatalf("budget a's order b:o and budget a:b's order o share the task %q; a owns a:b's tasks: %v", k, la.Owns(lab.TaskKey("o")))
	}
}

// TestLedgerConfirmSameOrderConcurrently: many payment transactions
// confirm one order at once: exactly one records it, the others answer a
// no-op (same lines) or ErrConflict (other lines), and one row and one
// confirm task exist.
func TestLedgerConfirmSameOrderConcurrently(t *testing.T) {
	e := newLedgerEnv(t)
	ctx := testCtx(t, time.Minute)
	const n = 8
	var wg sync.WaitGroup
	recorded := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			uses := int64(1)
			if i%2 == 1 {
				uses = 2 // another cart under the same order
			}
			tx, err := e.ob.db.Begin(ctx)
			if err != nil {
				errs[i] = err
				return
			}
			defer func() { _ = tx.Rollback(ctx) }()
			recorded[i], errs[i] = e.ledger.Confirm(ctx, tx, Redemption{Order: "o", Attributes: cust(1),
				Lines: []budget.Line{{Promotion: "p", Uses: uses}}})
			if errs[i] == nil {
				errs[i] = tx.Commit(ctx)
			}
		})
	}
	wg.Wait()
	won := -1
	for i := range n {
		if recorded[i] {
			if won >= 0 {
				t.Fatalf("transactions %d and %d both recorded the order", won, i)
			}
			won = i
		}
	}
	if won < 0 {
		t.Fatalf("no transaction recorded the order: %v", errs)
	}
	for i := range n {
		switch {
		case i%2 == won%2 && errs[i] != nil:
			t.Errorf("transaction %d (same lines as the winner): %v", i, errs[i])
		case i%2 != won%2 && !errors.Is(errs[i], budget.ErrConflict):
			t.Errorf("transaction %d (other lines): %v, want ErrConflict", i, errs[i])
		}
	}
	if n := e.ledgerRows(t, ctx); n != 1 {
		t.Fatalf("%d ledger rows, want 1", n)
	}
	if n := countRows(t, e.ob, `key = $1`, e.ledger.TaskKey("o")); n != 1 {
		t.Fatalf("%d confirm tasks, want 1", n)
	}
}

// TestFaultLedgerReconcileRepeatableRead: a database whose sessions
// default to REPEATABLE READ. Reconcile waits for the lock a payment's
// transaction holds; the payment commits; Reconcile's listing must count
// it ("every confirmation committed before it is counted"), which a
// snapshot taken before the lock was granted would not.
func TestFaultLedgerReconcileRepeatableRead(t *testing.T) {
	e := newLedgerEnv(t)
	ctx := testCtx(t, time.Minute)
	pool := e.ob.db.(*pgxpool.Pool)
	cfg := pool.Config().Copy()
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "repeatable read"
	rr, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rr.Close)
	l, err := NewLedger(rr, e.ob.schema, e.ledger.b, e.ob)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.reserve(ctx, "o1", 1); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := l.Confirm(ctx, tx, Redemption{Order: "o1", Attributes: cust(1), Lines: []budget.Line{{Promotion: "p", Uses: 1}}}); err != nil {
		t.Fatal(err)
	}
	type result struct {
		r   Reconciled
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := l.Reconcile(ctx)
		done <- result{r, err}
	}()
	waitAdvisoryWaiter(t, ctx, pool)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	if res.r.Redemptions != 1 {
		t.Fatalf("Reconcile counted %d redemptions, want the 1 committed while it waited", res.r.Redemptions)
	}
}

// waitAdvisoryWaiter returns once a session waits for an advisory lock.
func waitAdvisoryWaiter(t *testing.T, ctx context.Context, pool *pgxpool.Pool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("Reconcile never waited for the ledger's lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLedgerConfirmTypedNilTx: a nil *pgxpool.Tx in the pgx.Tx interface
// is bad input like a nil one, not a panic.
func TestLedgerConfirmTypedNilTx(t *testing.T) {
	e := newLedgerEnv(t)
	ctx := testCtx(t, time.Minute)
	var tx *pgxpool.Tx
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic: %v", p)
			}
		}()
		_, err = e.ledger.Confirm(ctx, tx, Redemption{Order: "o", Attributes: cust(1), Lines: []budget.Line{{Promotion: "p", Uses: 1}}})
	}()
	if !errors.Is(err, &ValidationError{Field: "tx"}) {
		t.Fatalf("Confirm with a nil *pgxpool.Tx: %v, want a *ValidationError with Field \"tx\"", err)
	}
}

// TestLedgerAmountAt2p53: a redemption of the largest amount (2^53
// minor units) survives the ledger exactly: after Redis lost everything,
// Reconcile counts it to the unit and the spend cap of 2^53 is full.
func TestLedgerAmountAt2p53(t *testing.T) {
	e := newLedgerEnv(t)
	ctx := testCtx(t, time.Minute)
	big := budget.Promotion{ID: "big", Caps: []budget.Cap{{Measure: budget.Spend, Limit: budget.MaxAmount}}}
	for _, b := range []*budget.Budget{e.shop, e.ledger.b} {
		if err := b.Define(big); err != nil {
			t.Fatal(err)
		}
	}
	lines := []budget.Line{{Promotion: "big", Uses: budget.MaxAmount, Amount: budget.MaxAmount}}
	if _, err := e.shop.Reserve(ctx, budget.Request{Order: "o", Lines: lines, Hold: time.Minute}); err != nil {
		t.Fatal(err)
	}
	tx, err := e.ob.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := e.ledger.Confirm(ctx, tx, Redemption{Order: "o", Lines: lines}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.drain(ctx); err != nil {
		t.Fatal(err)
	}
	reds, err := e.ledger.Redemptions(ctx)
	if err != nil || len(reds) != 1 || reds[0].Lines[0] != lines[0] {
		t.Fatalf("ledger holds %+v (%v), want %+v", reds, err, lines)
	}
	if err := e.direct.FlushDB(ctx).Err(); err != nil { // the test's private server
		t.Fatal(err)
	}
	if _, err := e.ledger.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	left, err := e.shop.Remaining(ctx, nil, "big")
	if err != nil || left["big"].Spend != 0 {
		t.Fatalf("after Reconcile: %+v %v, want no spend left", left, err)
	}
	if _, err := e.shop.Reserve(ctx, budget.Request{Order: "o2", Lines: []budget.Line{{Promotion: "big", Uses: 1, Amount: 1}},
		Hold: time.Minute}); !errors.Is(err, budget.ErrLimit) {
		t.Fatalf("a unit past a full 2^53 cap: %v, want ErrLimit", err)
	}
}

// TestLedgerLongestNames: the longest budget name and order ID the
// budget takes make a confirm task the outbox and the delay queue take,
// and the redemption lands in Redis; one byte more of order is refused
// by name and writes nothing.
func TestLedgerLongestNames(t *testing.T) {
	e := newLedgerEnv(t)
	ctx := testCtx(t, time.Minute)
	opts := budget.Options{Prefix: "shop", Promotions: []budget.Promotion{promo}}
	b, err := budget.New(e.direct, strings.Repeat("n", 128), opts)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLedger(e.ob.db, e.ob.schema, b, e.ob)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Reconcile(ctx); err != nil { // builds the budget
		t.Fatal(err)
	}
	one := []budget.Line{{Promotion: "p", Uses: 1}}
	for _, n := range []int{budget.MaxOrderBytes, budget.MaxOrderBytes + 1} {
		order := strings.Repeat("o", n)
		tx, err := e.ob.db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.Confirm(ctx, tx, Redemption{Order: order, Attributes: cust(1), Lines: one})
		if n > budget.MaxOrderBytes {
			_ = tx.Rollback(ctx)
			if !errors.Is(err, &ValidationError{Field: "redemption"}) || !errors.Is(err, &budget.ValidationError{Field: "order"}) {
				t.Fatalf("order of %d bytes: %v, want a *ValidationError", n, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("order of %d bytes: %v", n, err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := e.ob.RelayOnce(ctx, 10); err != nil {
			t.Fatal(err)
		}
		a, err := l.Apply(ctx, l.TaskKey(order), ledgerToken)
		if err != nil || !a.Reconciled || !a.Done {
			t.Fatalf("Apply: %+v %v (want reconciled: never reserved)", a, err)
		}
		left, err := b.Remaining(ctx, cust(1), "p")
		if err != nil || left["p"].Uses != 1 {
			t.Fatalf("Remaining %+v %v: want the ledger's redemption counted (1 of customer c1's 2 left)", left, err)
		}
	}
	if n := countRows(t, e.ob, `true`); n != 1 {
		t.Fatalf("%d outbox rows, want 1 (the refused order wrote none)", n)
	}
}
