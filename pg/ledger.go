package pg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/delay"
)

// LedgerTaskPrefix starts the key of every task a Ledger enqueues:
// LedgerTaskPrefix + budget name + ":" + order. A delay handler routes
// such a task to Ledger.Apply.
const LedgerTaskPrefix = "budget-confirm:"

// ledgerToken is the token of every confirm task: one task per order.
const ledgerToken = "confirm"

// Ledger keeps one budget's redemptions in schema's budget_ledger table:
// the truth, written in the caller's transaction. Redis's counters follow
// it through the outbox (Confirm, then Apply) and are rebuilt from it by
// Reconcile.
type Ledger struct {
	db     DB
	schema string
	b      *budget.Budget
	ob     *Outbox
}

// NewLedger returns the ledger of b in schema ("" = DefaultSchema); its
// confirm tasks go through ob. b's name must not hold a colon.
func NewLedger(db DB, schema string, b *budget.Budget, ob *Outbox) (*Ledger, error) {
	s, err := checkSchema(schema)
	if err != nil {
		return nil, err
	}
	if db == nil || b == nil || ob == nil {
		return nil, invalid("options", "nil DB, budget or outbox")
	}
	// A task key is prefix, name, ":", order, and an order may hold a
	// colon: with one in the name too, budgets "a" and "a:b" would share
	// keys (a's order "b:o" and a:b's order "o") and a's ledger would own
	// a:b's tasks.
	if strings.Contains(b.Name(), ":") {
		return nil, invalid("options", "budget name %s holds a colon: its confirm task keys would be ambiguous", quote(b.Name()))
	}
	return &Ledger{db: db, schema: s, b: b, ob: ob}, nil
}

// Redemption is a paid order as the ledger records it.
type Redemption struct {
	// Order is the order Reserve held: 1..budget.MaxOrderBytes bytes.
	Order      string
	Attributes map[string]string
	Lines      []budget.Line
	// At picks the period of period caps; zero means the transaction's
	// now(). Pass the reservation's time (Reservation.Expires minus its
	// Hold) to count it in the period Redis counted the hold in.
	At time.Time
}

// TaskKey is the key of order's confirm task.
func (l *Ledger) TaskKey(order string) string {
	return LedgerTaskPrefix + l.b.Name() + ":" + order
}

// Owns reports whether key is a confirm task of this ledger's budget.
func (l *Ledger) Owns(key string) bool {
	return strings.HasPrefix(key, LedgerTaskPrefix+l.b.Name()+":")
}

func (l *Ledger) lockName() string { return "tierset.budget." + l.schema + "." + l.b.Name() }

// Confirm records r in tx, the caller's transaction (the one that marks
// the order paid), and enqueues in tx, through the outbox, the task that
// confirms it in Redis: both exist exactly when tx commits. It returns
// recorded false when the order is already in the ledger with the same
// attributes and lines (a retry); with others, an error matching
// budget.ErrConflict. Bad input is a *ValidationError (Field "tx",
// "order" or "redemption", whose Cause is the *budget.ValidationError)
// and writes nothing. tx holds a lock Reconcile waits for until it ends.
func (l *Ledger) Confirm(ctx context.Context, tx pgx.Tx, r Redemption) (recorded bool, err error) {
	if isNilTx(tx) {
		return false, invalid("tx", "nil transaction")
	}
	if r.Order == "" {
		return false, invalid("order", "empty (1..%d bytes)", budget.MaxOrderBytes)
	}
	if err := l.b.CheckRedemption(budget.Redemption{Order: r.Order, Attributes: r.Attributes, Lines: r.Lines}); err != nil {
		return false, invalid("redemption", "order %s: %w", quote(r.Order), err)
	}
	attrs, lines := encodeRedemption(r)
	var at any
	if !r.At.IsZero() {
		at = r.At
	}
	// Shared: confirmations run side by side; Reconcile takes it alone,
	// so its listing holds every confirmation committed before it.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared(hashtext($1))`, l.lockName()); err != nil {
		return false, fmt.Errorf("pg: ledger confirm %q: lock: %w", r.Order, err)
	}
	err = tx.QueryRow(ctx, `INSERT INTO `+l.schema+`.budget_ledger (budget, order_id, attributes, lines, counted_at)
		VALUES ($1, $2, $3::jsonb, $4::jsonb, coalesce($5::timestamptz, now()))
		ON CONFLICT (budget, order_id) DO NOTHING RETURNING true`,
		l.b.Name(), r.Order, attrs, lines, at).Scan(&recorded)
	if errors.Is(err, pgx.ErrNoRows) {
		var same bool
		if err := tx.QueryRow(ctx, `SELECT attributes = $3::jsonb AND lines = $4::jsonb FROM `+l.schema+`.budget_ledger
			WHERE budget = $1 AND order_id = $2`, l.b.Name(), r.Order, attrs, lines).Scan(&same); err != nil {
			return false, fmt.Errorf("pg: ledger confirm %q: %w", r.Order, err)
		}
		if !same {
			return false, fmt.Errorf("%w: order %q is in the ledger with other attributes or lines", budget.ErrConflict, r.Order)
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pg: ledger confirm %q: %w", r.Order, err)
	}
	if _, err := l.ob.Enqueue(ctx, tx, delay.Job{Key: l.TaskKey(r.Order), Token: ledgerToken}); err != nil {
		return false, err
	}
	return true, nil
}

// isNilTx reports a nil tx, typed nils included: a nil *pgxpool.Tx in
// the interface is not == nil, and its first statement would dereference
// it.
func isNilTx(tx pgx.Tx) bool {
	if tx == nil {
		return true
	}
	v := reflect.ValueOf(tx)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// encodeRedemption is r's attributes and lines as the ledger stores them:
// lines sorted by promotion, so one cart always encodes the same.
func encodeRedemption(r Redemption) (attrs, lines string) {
	a := r.Attributes
	if a == nil {
		a = map[string]string{}
	}
	ls := slices.Clone(r.Lines)
	slices.SortFunc(ls, func(x, y budget.Line) int { return strings.Compare(x.Promotion, y.Promotion) })
	ab, _ := json.Marshal(a)  // strings only: cannot fail
	lb, _ := json.Marshal(ls) // strings and integers only
	return string(ab), string(lb)
}

// Applied is what Apply did.
type Applied struct {
	Order string
	// Confirmation is Redis's answer when it confirmed the order.
	Confirmation budget.Confirmation
	// Reconciled: Redis could not confirm the order as the ledger has it
	// (its hold ended or was released before the task ran, Redis lost it,
	// it never reached Redis, or Redis confirmed other attributes or
	// lines: Cause matches budget.ErrConflict); Apply ran Reconcile, so
	// the counters count it as the ledger does. Cause is what Redis
	// answered.
	Reconciled bool
	Cause      error
	// Done: Apply marked the task's row done (false: it already was).
	Done bool
}

// Apply is the work of a confirm task (key and token as delivered): it
// confirms the order in Redis, or, when Redis cannot, rebuilds the
// counters from the ledger (Reconcile), then marks the task's outbox row
// done. Redis confirming is idempotent, so a task delivered twice
// changes nothing the second time. An error leaves the row pending: the
// delay queue's retry runs Apply again.
func (l *Ledger) Apply(ctx context.Context, key, token string) (Applied, error) {
	var a Applied
	if !l.Owns(key) || token != ledgerToken {
		return a, invalid("key", "%q token %q is not a confirm task of budget %q", key, token, l.b.Name())
	}
	a.Order = strings.TrimPrefix(key, LedgerTaskPrefix+l.b.Name()+":")
	c, err := l.b.Confirm(ctx, a.Order)
	switch {
	case err == nil:
		a.Confirmation = c
		// Redis confirmed the cart it reserved; the ledger may hold
		// another (the payment recorded other lines): then the ledger's
		// counts, so reconcile.
		same, err := l.sameAsLedger(ctx, c)
		if err != nil {
			return a, fmt.Errorf("pg: ledger apply %q: %w", a.Order, err)
		}
		if !same {
			a.Cause = fmt.Errorf("%w: order %q: Redis confirmed attributes or lines other than the ledger's", budget.ErrConflict, a.Order)
		}
	case errors.Is(err, budget.ErrExpired), errors.Is(err, budget.ErrReleased),
		errors.Is(err, budget.ErrNotFound), errors.Is(err, budget.ErrLost):
		a.Cause = err
	default:
		return a, fmt.Errorf("pg: ledger apply %q: %w", a.Order, err)
	}
	if a.Cause != nil {
		if _, err := l.Reconcile(ctx); err != nil {
			return a, fmt.Errorf("pg: ledger apply %q: redis answered %v; reconcile: %w", a.Order, a.Cause, err)
		}
		a.Reconciled = true
	}
	tx, err := l.db.Begin(ctx)
	if err != nil {
		return a, fmt.Errorf("pg: ledger apply %q: begin: %w", a.Order, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	err = l.ob.Done(ctx, tx, key, token)
	if errors.Is(err, ErrNotPending) {
		return a, nil
	}
	if err != nil {
		return a, err
	}
	if err := tx.Commit(ctx); err != nil {
		return a, fmt.Errorf("pg: ledger apply %q: commit: %w", a.Order, err)
	}
	a.Done = true
	return a, nil
}

// sameAsLedger reports whether the ledger's row of c's order holds c's
// attributes and lines (false when it holds no row of it).
func (l *Ledger) sameAsLedger(ctx context.Context, c budget.Confirmation) (bool, error) {
	attrs, lines := encodeRedemption(Redemption{Attributes: c.Attributes, Lines: c.Lines})
	var same bool
	err := l.db.QueryRow(ctx, `SELECT attributes = $3::jsonb AND lines = $4::jsonb FROM `+l.schema+`.budget_ledger
		WHERE budget = $1 AND order_id = $2`, l.b.Name(), c.Order, attrs, lines).Scan(&same)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return same, err
}

// Reconciled is what Reconcile did.
type Reconciled struct {
	Redemptions int    // ledger rows counted
	Epoch       string // the budget's new epoch
}

// Reconcile sets Redis's counters from the ledger with budget.Rebuild:
// every redemption the ledger holds, each order named so Redis counts it
// once (a hold of it still live stops counting; its record becomes
// confirmed), plus the holds still live. It holds the ledger's lock
// alone while it runs, so every confirmation committed before it is
// counted and none commits meanwhile; Redis answers budget.ErrLost to
// every call until it ends. Run it after Redis lost data (a failover, a
// FLUSH, an eviction: calls answer ErrLost), and to check a ledger and
// Redis agree. Every promotion the ledger names must be defined in the
// budget.
func (l *Ledger) Reconcile(ctx context.Context) (Reconciled, error) {
	var res Reconciled
	tx, err := l.db.Begin(ctx)
	if err != nil {
		return res, fmt.Errorf("pg: ledger reconcile: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// Read committed whatever the session's default: under repeatable
	// read the snapshot would be the lock statement's, taken before the
	// lock was granted, and miss what committed while it waited.
	if _, err := tx.Exec(ctx, `SET TRANSACTION ISOLATION LEVEL READ COMMITTED`); err != nil {
		return res, fmt.Errorf("pg: ledger reconcile: %w", err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, l.lockName()); err != nil {
		return res, fmt.Errorf("pg: ledger reconcile: lock: %w", err)
	}
	// One statement, read-committed: its snapshot is taken after the
	// lock, so it sees every confirmation that committed before.
	reds, err := l.list(ctx, tx)
	if err != nil {
		return res, err
	}
	res.Redemptions = len(reds)
	res.Epoch, err = l.b.Rebuild(ctx, reds)
	if err != nil {
		return res, fmt.Errorf("pg: ledger reconcile: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return res, fmt.Errorf("pg: ledger reconcile: commit: %w", err)
	}
	return res, nil
}

// Redemptions lists the ledger's redemptions of the budget, as Reconcile
// counts them.
func (l *Ledger) Redemptions(ctx context.Context) ([]budget.Redemption, error) {
	return l.list(ctx, l.db)
}

func (l *Ledger) list(ctx context.Context, q Querier) ([]budget.Redemption, error) {
	rows, err := q.Query(ctx, `SELECT order_id, attributes, lines, counted_at FROM `+l.schema+`.budget_ledger
		WHERE budget = $1 ORDER BY order_id`, l.b.Name())
	if err != nil {
		return nil, fmt.Errorf("pg: ledger list: %w", err)
	}
	defer rows.Close()
	var out []budget.Redemption
	for rows.Next() {
		var r budget.Redemption
		var attrs, lines []byte
		if err := rows.Scan(&r.Order, &attrs, &lines, &r.At); err != nil {
			return nil, fmt.Errorf("pg: ledger list: %w", err)
		}
		if err := json.Unmarshal(attrs, &r.Attributes); err != nil {
			return nil, fmt.Errorf("pg: ledger list: order %q attributes: %w", r.Order, err)
		}
		if err := json.Unmarshal(lines, &r.Lines); err != nil {
			return nil, fmt.Errorf("pg: ledger list: order %q lines: %w", r.Order, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pg: ledger list: %w", err)
	}
	return out, nil
}
