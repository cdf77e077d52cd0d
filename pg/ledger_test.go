package pg

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delayraw"
	"github.com/tierset/tierset/internal/testredis"
)

// ledgerEnv is a ledger on a fresh schema over a private redis-server
// behind a fault proxy: shop (direct) is the budget checkout reserves
// on; the ledger's Apply confirms through cut (the proxy), which the
// fault test cuts.
type ledgerEnv struct {
	f      *testredis.Faulty
	direct *redis.Client
	shop   *budget.Budget
	ledger *Ledger
	ob     *Outbox
	q      *delay.Queue
}

const ledgerCap = 10

// promo: ledgerCap uses in all, 2 per customer.
var promo = budget.Promotion{ID: "p", Caps: []budget.Cap{
	{Measure: budget.Uses, Limit: ledgerCap},
	{Measure: budget.Uses, Limit: 2, Per: "customer"},
}}

func newLedgerEnv(t *testing.T) *ledgerEnv {
	t.Helper()
	pool, schema := testDB(t)
	f := testredis.StartFaulty(t)
	e := &ledgerEnv{f: f, direct: f.Server.Client(&redis.Options{PoolSize: 32})}
	opts := budget.Options{Prefix: "shop", Promotions: []budget.Promotion{promo}}
	var err error
	if e.shop, err = budget.New(e.direct, "shop", opts); err != nil {
		t.Fatal(err)
	}
	viaProxy, err := budget.New(f.Cut, "shop", opts)
	if err != nil {
		t.Fatal(err)
	}
	// A failed Apply comes back at once (see drain).
	if e.q, err = delay.New(e.direct, "budget", delay.Options{Backoff: func(int) time.Duration { return time.Millisecond }}); err != nil {
		t.Fatal(err)
	}
	if e.ob, err = NewOutbox(pool, schema, e.q, OutboxOptions{}); err != nil {
		t.Fatal(err)
	}
	if e.ledger, err = NewLedger(pool, schema, viaProxy, e.ob); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ledger.Reconcile(testCtx(t, 30*time.Second)); err != nil { // builds the budget
		t.Fatal(err)
	}
	return e
}

func cust(i int) map[string]string { return map[string]string{"customer": fmt.Sprint("c", i)} }

// reserve holds one use of p for order (customer i).
func (e *ledgerEnv) reserve(ctx context.Context, order string, i int) error {
	_, err := e.shop.Reserve(ctx, budget.Request{Order: order, Attributes: cust(i),
		Lines: []budget.Line{{Promotion: "p", Uses: 1}}, Hold: time.Minute})
	return err
}

// pay is the caller's payment transaction: it records the redemption
// in the ledger and commits, or rolls back.
func (e *ledgerEnv) pay(ctx context.Context, order string, i int, commit bool) (bool, error) {
	tx, err := e.ob.db.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	rec, err := e.ledger.Confirm(ctx, tx, Redemption{Order: order, Attributes: cust(i), Lines: []budget.Line{{Promotion: "p", Uses: 1}}})
	if err != nil || !commit {
		return rec, err
	}
	return rec, tx.Commit(ctx)
}

// drain relays the outbox and runs Apply on every confirm task Redis
// delivers, acking it when Apply succeeds and giving it back for a retry
// when not, as a delay handler's outcome does; it returns Apply's
// outcomes and the first error.
func (e *ledgerEnv) drain(ctx context.Context) ([]Applied, error) {
	if _, err := e.ob.RelayOnce(ctx, delay.MaxBatch); err != nil {
		return nil, err
	}
	tasks, err := delayraw.Take(ctx, e.q, delay.MaxBatch)
	if err != nil {
		return nil, err
	}
	var out []Applied
	var first error
	var ok []*delay.Task
	for _, task := range tasks {
		a, err := e.ledger.Apply(ctx, task.Key, task.Token)
		if err != nil {
			first = cmpErr(first, err)
			if _, rerr := delayraw.Retry(ctx, e.q, task, err); rerr != nil {
				first = cmpErr(first, rerr)
			}
			continue
		}
		out = append(out, a)
		ok = append(ok, task)
	}
	if len(ok) > 0 {
		if _, err := delayraw.Ack(ctx, e.q, ok); err != nil {
			first = cmpErr(first, err)
		}
	}
	return out, first
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// used is what Redis counts for p in all: the cap less what is left.
func (e *ledgerEnv) used(t *testing.T, ctx context.Context) int64 {
	t.Helper()
	// Remaining is the least of the caps: read the total cap alone.
	b, err := budget.New(e.direct, "shop", budget.Options{Prefix: "shop", Promotions: []budget.Promotion{{ID: "p",
		Caps: []budget.Cap{{Measure: budget.Uses, Limit: ledgerCap}}}}})
	if err != nil {
		t.Fatal(err)
	}
	left, err := b.Remaining(ctx, nil, "p")
	if err != nil {
		t.Fatalf("Remaining: %v", err)
	}
	return ledgerCap - left["p"].Uses
}

func (e *ledgerEnv) ledgerRows(t *testing.T, ctx context.Context) int {
	t.Helper()
	reds, err := e.ledger.Redemptions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return len(reds)
}

// TestLedgerConfirmApply: a redemption exists exactly when the caller's
// transaction commits, with its confirm task; Apply confirms it in Redis
// once, however often it is delivered; the same order again is a no-op,
// with other lines ErrConflict.
func TestLedgerConfirmApply(t *testing.T) {
	e := newLedgerEnv(t)
	ctx := testCtx(t, time.Minute)
	for i := range 4 {
		if err := e.reserve(ctx, fmt.Sprint("o", i), i); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if rec, err := e.pay(ctx, fmt.Sprint("o", i), i, true); err != nil || !rec {
			t.Fatalf("pay o%d: %v %v", i, rec, err)
		}
	}
	if _, err := e.pay(ctx, "o3", 3, false); err != nil { // rolled back
		t.Fatal(err)
	}
	if rec, err := e.pay(ctx, "o0", 0, true); err != nil || rec {
		t.Fatalf("o0 again: recorded %v, %v (want false, nil)", rec, err)
	}
	tx, err := e.ob.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.ledger.Confirm(ctx, tx, Redemption{Order: "o0", Attributes: cust(0), Lines: []budget.Line{{Promotion: "p", Uses: 2}}})
	_ = tx.Rollback(ctx)
	if !errors.Is(err, budget.ErrConflict) {
		t.Fatalf("o0 with other lines: %v", err)
	}
	if n := e.ledgerRows(t, ctx); n != 3 {
		t.Fatalf("%d ledger rows, want 3 (the rolled-back one absent)", n)
	}
	if n := countRows(t, e.ob, `key LIKE 'budget-confirm:%'`); n != 3 {
		t.Fatalf("%d confirm tasks, want 3", n)
	}
	applied, err := e.drain(ctx)
	if err != nil || len(applied) != 3 {
		t.Fatalf("drain: %+v %v", applied, err)
	}
	for _, a := range applied {
		if !a.Done || a.Reconciled || !a.Confirmation.New {
			t.Errorf("applied %+v: want confirmed anew and done", a)
		}
	}
	// 3 redeemed + o3 still held.
	if u := e.used(t, ctx); u != 4 {
		t.Fatalf("Redis counts %d, want 4", u)
	}
	// A second delivery (Redis lost the ack, say) changes nothing.
	a, err := e.ledger.Apply(ctx, e.ledger.TaskKey("o1"), ledgerToken)
	if err != nil || a.Done || a.Confirmation.New {
		t.Fatalf("second delivery: %+v %v", a, err)
	}
	if u := e.used(t, ctx); u != 4 {
		t.Fatalf("after a second delivery Redis counts %d, want 4", u)
	}
}

// TestLedgerReconcile: after each way Redis loses a budget's state (the
// test's keys flushed, a counter evicted, the keyset or the epoch
// evicted), checkout reserves nothing (ErrLost, never a grant past the
// cap), and Reconcile brings the counters back equal to the ledger plus
// the holds still live.
func TestLedgerReconcile(t *testing.T) {
	e := newLedgerEnv(t)
	ctx := testCtx(t, time.Minute)
	for i := range 6 {
		if err := e.reserve(ctx, fmt.Sprint("o", i), i); err != nil {
			t.Fatal(err)
		}
		if i < 5 {
			if _, err := e.pay(ctx, fmt.Sprint("o", i), i, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := e.drain(ctx); err != nil {
		t.Fatal(err)
	}
	base := e.shop.Keys()[0]
	losses := []struct {
		name string
		keys []string // nil: every key of the test (FLUSHDB on its private server)
		// held: o5's hold survives the loss.
		held bool
	}{
		{"counter evicted", []string{base + "c:p"}, true},
		{"keyset evicted", []string{e.shop.Keys()[5]}, true},
		{"epoch evicted", []string{e.shop.Keys()[1]}, true},
		{"flushdb", nil, false}, // last: o5's hold goes with it
	}
	for _, l := range losses {
		t.Run(l.name, func(t *testing.T) {
			if l.keys == nil {
				if err := e.direct.FlushDB(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			} else if err := e.direct.Del(ctx, l.keys...).Err(); err != nil {
				t.Fatal(err)
			}
			for i := 10; i < 20; i++ {
				if err := e.reserve(ctx, fmt.Sprint("late", i), i); !errors.Is(err, budget.ErrLost) {
					t.Fatalf("after the loss: Reserve = %v, want ErrLost", err)
				}
			}
			if _, err := e.shop.Remaining(ctx, cust(0), "p"); !errors.Is(err, budget.ErrLost) {
				t.Fatalf("after the loss: Remaining = %v, want ErrLost", err)
			}
			res, err := e.ledger.Reconcile(ctx)
			if err != nil || res.Redemptions != 5 {
				t.Fatalf("Reconcile: %+v %v", res, err)
			}
			want := int64(5)
			if l.held {
				want = 6
			}
			if u := e.used(t, ctx); u != want {
				t.Fatalf("after Reconcile Redis counts %d, want %d (the ledger's 5, o5 held: %v)", u, want, l.held)
			}
		})
	}
	// The counters are the ledger's: exactly the rest of the cap is granted.
	if granted := e.grantRest(t, ctx, "after", 100, 20); granted != ledgerCap-5 {
		t.Fatalf("granted %d after reconciling, want %d", granted, ledgerCap-5)
	}
	if u := e.used(t, ctx); u != ledgerCap {
		t.Fatalf("Redis counts %d, want the cap %d", u, ledgerCap)
	}
}

// TestLedgerBadInput: every refused input is a *ValidationError naming
// it (matching ErrInvalid; a refused redemption also carries the
// *budget.ValidationError naming what budget refused), and nothing is
// written: no ledger row, no outbox row.
func TestLedgerBadInput(t *testing.T) {
	e := newLedgerEnv(t)
	ctx := testCtx(t, time.Minute)
	one := []budget.Line{{Promotion: "p", Uses: 1}}
	tests := []struct {
		name   string
		r      Redemption
		nilTx  bool
		field  string
		budget string // the *budget.ValidationError's field, when the cause is one
	}{
		{"nil tx", Redemption{Order: "o", Attributes: cust(1), Lines: one}, true, "tx", ""},
		{"empty order", Redemption{Attributes: cust(1), Lines: one}, false, "order", ""},
		{"order with a newline", Redemption{Order: "a\nb", Attributes: cust(1), Lines: one}, false, "redemption", "order"},
		{"no lines", Redemption{Order: "o", Attributes: cust(1)}, false, "redemption", "lines"},
		{"unknown promotion", Redemption{Order: "o", Attributes: cust(1), Lines: []budget.Line{{Promotion: "q", Uses: 1}}}, false, "redemption", "promotion"},
		{"zero uses", Redemption{Order: "o", Attributes: cust(1), Lines: []budget.Line{{Promotion: "p"}}}, false, "redemption", "uses"},
		{"negative amount", Redemption{Order: "o", Attributes: cust(1), Lines: []budget.Line{{Promotion: "p", Uses: 1, Amount: -1}}}, false, "redemption", "amount"},
		{"customer missing", Redemption{Order: "o", Lines: one}, false, "redemption", "attributes"},
		{"customer not UTF-8", Redemption{Order: "o", Attributes: map[string]string{"customer": "c\xff"}, Lines: one}, false, "redemption", "attributes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tx, err := e.ob.db.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			arg := tx
			if tt.nilTx {
				arg = nil
			}
			_, err = e.ledger.Confirm(ctx, arg, tt.r)
			if !errors.Is(err, ErrInvalid) || !errors.Is(err, &ValidationError{Field: tt.field}) {
				t.Fatalf("err = %v, want a *ValidationError with Field %q", err, tt.field)
			}
			if tt.budget != "" && (!errors.Is(err, budget.ErrInvalid) || !errors.Is(err, &budget.ValidationError{Field: tt.budget})) {
				t.Fatalf("err = %v, want it to carry a *budget.ValidationError with Field %q", err, tt.budget)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if n := e.ledgerRows(t, ctx); n != 0 {
				t.Fatalf("%d ledger rows after a refused input", n)
			}
			if n := countRows(t, e.ob, `true`); n != 0 {
				t.Fatalf("%d outbox rows after a refused input", n)
			}
		})
	}
	for _, c := range []struct {
		name, key, token string
	}{
		{"another budget's task", LedgerTaskPrefix + "other:o", ledgerToken},
		{"not a ledger task", "order:1", ledgerToken},
		{"another token", e.ledger.TaskKey("o"), "x"},
	} {
		if _, err := e.ledger.Apply(ctx, c.key, c.token); !errors.Is(err, &ValidationError{Field: "key"}) {
			t.Errorf("Apply %s: %v, want a *ValidationError with Field \"key\"", c.name, err)
		}
	}
	if _, err := NewLedger(e.ob.db, e.ob.schema, nil, e.ob); !errors.Is(err, &ValidationError{Field: "options"}) {
		t.Errorf("NewLedger without a budget: %v", err)
	}
	if _, err := NewLedger(e.ob.db, "Bad-Schema", e.shop, e.ob); !errors.Is(err, &ValidationError{Field: "schema"}) {
		t.Errorf("NewLedger with a bad schema: %v", err)
	}
}
