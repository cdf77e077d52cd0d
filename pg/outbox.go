package pg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/tierset/tierset/delay"
)

// Outbox row states.
const (
	StateNew       = "new"       // committed, not yet in Redis
	StateRelayed   = "relayed"   // in Redis (or about to be re-added by Reconcile)
	StateDone      = "done"      // its handler committed
	StateCancelled = "cancelled" // cancelled by key
	StateRefused   = "refused"   // the queue refused it (last_error says why)
)

// OutboxOptions configure an Outbox. The zero value is the default.
type OutboxOptions struct {
	// Now is the clock that turns a Job's After into a due time. Default
	// time.Now.
	Now func() time.Time
}

// Outbox is the delay queue's transactional outbox in schema's
// delay_outbox table, for one queue.
type Outbox struct {
	db     DB
	schema string
	q      *delay.Queue
	now    func() time.Time
	// afterEnqueue runs between a relay batch's EnqueueBatch and the
	// commit that marks its rows; tests use it to kill the relay there.
	afterEnqueue func(n int)
	// afterRows runs in Cancel and Reschedule between their row update and
	// their Redis step; tests hold a concurrent enqueue and relay there.
	afterRows func(tokens []string)
	// reconcileStarted runs when a periodic reconcile pass has its turn,
	// with the time it was due.
	reconcileStarted func(due time.Time)
}

// NewOutbox returns the outbox of q in schema ("" = DefaultSchema).
func NewOutbox(db DB, schema string, q *delay.Queue, opts OutboxOptions) (*Outbox, error) {
	s, err := checkSchema(schema)
	if err != nil {
		return nil, err
	}
	if db == nil || q == nil {
		return nil, invalid("options", "nil DB or queue")
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Outbox{db: db, schema: s, q: q, now: now}, nil
}

// Queue returns the delay queue the outbox feeds.
func (o *Outbox) Queue() *delay.Queue { return o.q }

// NewToken returns a random 128-bit token in hex.
func NewToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Enqueue writes job in tx: the task exists exactly when tx commits, and
// reaches Redis through the relay. An empty Token gets NewToken; the
// token is returned. Enqueueing the same (Key, Token) twice is a no-op.
// job.After counts from Options.Now at this call. A job the queue would
// refuse returns a *ValidationError (matching ErrInvalid) whose Cause is
// the *delay.ValidationError (matching delay.ErrInvalid), and writes nothing;
// so does a nil tx, typed nils included (Field "tx").
func (o *Outbox) Enqueue(ctx context.Context, tx pgx.Tx, job delay.Job) (token string, err error) {
	if isNilTx(tx) {
		return "", invalid("tx", "nil transaction")
	}
	due, err := o.checkJob(&job)
	if err != nil {
		return "", err
	}
	if job.Payload == nil {
		job.Payload = []byte{}
	}
	_, err = tx.Exec(ctx, `INSERT INTO `+o.schema+`.delay_outbox (queue, key, token, payload, due_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (queue, key, token) DO NOTHING`,
		o.q.Name(), job.Key, job.Token, job.Payload, due)
	if err != nil {
		return "", fmt.Errorf("pg: outbox enqueue %q: %w", job.Key, err)
	}
	return job.Token, nil
}

func (o *Outbox) checkJob(job *delay.Job) (time.Time, error) {
	bad := func(field, format string, args ...any) (time.Time, error) {
		d := &delay.ValidationError{Field: field, Detail: fmt.Sprintf(format, args...)}
		return time.Time{}, &ValidationError{Field: field, Detail: d.Detail, Cause: d}
	}
	if job.Key == "" || len(job.Key) > delay.MaxKeyBytes || !printable(job.Key) {
		return bad("key", "key %q (1..%d bytes of UTF-8, no control characters)", job.Key, delay.MaxKeyBytes)
	}
	if job.Token == "" {
		job.Token = NewToken()
	}
	if len(job.Token) > delay.MaxTokenBytes || !printable(job.Token) || strings.Contains(job.Token, ",") {
		return bad("token", "token %q (at most %d bytes, no control characters or commas)", job.Token, delay.MaxTokenBytes)
	}
	if max := o.q.Options().MaxPayload; len(job.Payload) > max {
		return bad("payload", "%d bytes (max %d)", len(job.Payload), max)
	}
	switch {
	case !job.At.IsZero() && job.After != 0:
		return bad("when", "key %q", job.Key)
	case job.After < 0:
		return bad("delay", "%v", job.After)
	case !job.At.IsZero():
		return job.At, nil
	}
	return o.now().Add(job.After), nil
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// Done marks the task (key, token) done in tx, the transaction in which its
// handler does its work: once tx commits, Source stops listing it and a
// reconcile never re-adds it. It returns ErrNotPending when the row is
// already done, cancelled or unknown: the handler must then not do the
// work again (a task may be delivered twice after Redis lost data). A nil
// tx, typed nils included, is a *ValidationError with Field "tx".
func (o *Outbox) Done(ctx context.Context, tx pgx.Tx, key, token string) error {
	if isNilTx(tx) {
		return invalid("tx", "nil transaction")
	}
	var id int64
	err := tx.QueryRow(ctx, `UPDATE `+o.schema+`.delay_outbox SET state = 'done', finished_at = now()
		WHERE queue = $1 AND key = $2 AND token = $3 AND state IN ('new', 'relayed') RETURNING id`,
		o.q.Name(), key, token).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %q token %q", ErrNotPending, key, token)
	}
	if err != nil {
		return fmt.Errorf("pg: outbox done %q: %w", key, err)
	}
	return nil
}

// CancelResult is what Cancel did in the database and in Redis.
type CancelResult struct {
	Rows  int                // pending rows marked cancelled
	Redis delay.CancelResult // what the queue removed or marked, summed over those rows' tokens
}

// Cancel marks every pending task of key cancelled in the database, then
// cancels in Redis exactly the (key, token) pairs of the rows it changed:
// a task of key enqueued and relayed meanwhile is neither cancelled nor
// touched. The rows are committed first (the database is the truth): if
// the Redis step fails, a later Reconcile removes those tasks. A relay
// batch holding a row finishes first (row locks), so a cancelled row is
// never relayed afterwards. Cancel waits for a running Reconcile.
func (o *Outbox) Cancel(ctx context.Context, key string) (CancelResult, error) {
	var res CancelResult
	tokens, err := o.changeRows(ctx, key, `state = 'cancelled', finished_at = now()`, nil)
	if err != nil {
		return res, fmt.Errorf("pg: outbox cancel %q: %w", key, err)
	}
	res.Rows = len(tokens)
	for _, tok := range tokens {
		r, err := o.q.Cancel(ctx, delay.Selector{Key: key, Token: tok})
		if err != nil {
			return res, fmt.Errorf("pg: outbox cancel %q token %q in redis (the database says cancelled; Reconcile removes it): %w", key, tok, err)
		}
		res.Redis.Found += r.Found
		res.Redis.Pending += r.Pending
		res.Redis.InFlight += r.InFlight
		res.Redis.Dead += r.Dead
		res.Redis.Already += r.Already
	}
	return res, nil
}

// RescheduleResult is what Reschedule did in the database and in Redis.
type RescheduleResult struct {
	Rows  int
	Due   time.Time
	Redis delay.RescheduleResult // summed over the changed rows' tokens
}

// Reschedule moves every pending task of key to w: it updates the rows
// and, holding their locks, moves in Redis exactly the (key, token) pairs
// of the rows it changed, then commits. A task of key enqueued and
// relayed meanwhile keeps its own due time; two Reschedules of one key
// take turns, so Redis ends at the time the rows say. A row not yet
// relayed reaches Redis with its new time. If the Redis step fails the
// rows still commit with the new time and the error is returned; if the
// commit fails (ctx ended, say) after tasks moved, the rows keep their
// old time. Either way the next Reconcile moves the tasks to their rows'
// time. Reschedule waits for a running Reconcile.
func (o *Outbox) Reschedule(ctx context.Context, key string, w delay.When) (RescheduleResult, error) {
	res := RescheduleResult{Due: w.At}
	if !w.At.IsZero() && w.After != 0 || w.After < 0 {
		d := &delay.ValidationError{Field: "when", Detail: fmt.Sprintf("reschedule %q: At or a non-negative After, not both", key)}
		return res, &ValidationError{Field: "when", Detail: d.Detail, Cause: d}
	}
	if w.At.IsZero() {
		res.Due = o.now().Add(w.After)
	}
	var redisErr error
	tokens, err := o.changeRows(ctx, key, `due_at = $3`, func(tokens []string) {
		for _, tok := range tokens {
			r, err := o.q.Reschedule(ctx, delay.Selector{Key: key, Token: tok}, delay.At(res.Due))
			if err != nil {
				redisErr = fmt.Errorf("pg: outbox reschedule %q token %q in redis (the database has the new time; Reconcile moves it): %w", key, tok, err)
				return
			}
			res.Redis.Moved += r.Moved
			res.Redis.InFlight += r.InFlight
			res.Redis.Dead += r.Dead
			if r.Moved > 0 {
				res.Redis.Due = r.Due
			}
		}
	}, res.Due)
	res.Rows = len(tokens)
	if err != nil {
		return res, fmt.Errorf("pg: outbox reschedule %q: %w", key, err)
	}
	return res, redisErr
}

// changeRows sets set on the pending rows of key in one transaction and
// returns their tokens. It holds the relay lock shared, so it never runs
// while Reconcile does (which could list a row before the change and act
// on Redis after it). locked, when set, runs while the rows are locked,
// before the commit. afterRows (tests) runs just before the caller's
// Redis step: before locked, or after the commit when locked is nil.
func (o *Outbox) changeRows(ctx context.Context, key, set string, locked func([]string), args ...any) ([]string, error) {
	tx, err := o.db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared(hashtext($1))`, o.lockName()); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	rows, err := tx.Query(ctx, `UPDATE `+o.schema+`.delay_outbox SET `+set+`
		WHERE queue = $1 AND key = $2 AND state IN ('new', 'relayed') RETURNING token`,
		append([]any{o.q.Name(), key}, args...)...)
	if err != nil {
		return nil, err
	}
	tokens, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	if locked != nil {
		if o.afterRows != nil {
			o.afterRows(tokens)
		}
		locked(tokens)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	if locked == nil && o.afterRows != nil {
		o.afterRows(tokens)
	}
	return tokens, nil
}

// Purge deletes done, cancelled and refused rows finished before before,
// at most limit of them, and returns how many it deleted.
func (o *Outbox) Purge(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, invalid("limit", "purge limit %d (want at least 1)", limit)
	}
	tag, err := o.db.Exec(ctx, `DELETE FROM `+o.schema+`.delay_outbox WHERE id IN (
		SELECT id FROM `+o.schema+`.delay_outbox WHERE queue = $1 AND state IN ('done', 'cancelled', 'refused')
		AND finished_at < $2 ORDER BY id LIMIT $3)`, o.q.Name(), before, limit)
	if err != nil {
		return 0, fmt.Errorf("pg: outbox purge: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
