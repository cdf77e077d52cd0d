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
}

// NewOutbox returns the outbox of q in schema ("" = DefaultSchema).
func NewOutbox(db DB, schema string, q *delay.Queue, opts OutboxOptions) (*Outbox, error) {
	s, err := checkSchema(schema)
	if err != nil {
		return nil, err
	}
	if db == nil || q == nil {
		return nil, fmt.Errorf("%w: nil DB or queue", ErrInvalidOptions)
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
// refuse returns an error wrapping ErrBadJob and the delay sentinel, and
// writes nothing.
func (o *Outbox) Enqueue(ctx context.Context, tx pgx.Tx, job delay.Job) (token string, err error) {
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
	bad := func(sentinel error, format string, args ...any) (time.Time, error) {
		return time.Time{}, fmt.Errorf("%w: %w: %s", ErrBadJob, sentinel, fmt.Sprintf(format, args...))
	}
	if job.Key == "" || len(job.Key) > delay.MaxKeyBytes || !printable(job.Key) {
		return bad(delay.ErrInvalidKey, "key %q (1..%d bytes of UTF-8, no control characters)", job.Key, delay.MaxKeyBytes)
	}
	if job.Token == "" {
		job.Token = NewToken()
	}
	if len(job.Token) > delay.MaxTokenBytes || !printable(job.Token) || strings.Contains(job.Token, ",") {
		return bad(delay.ErrInvalidToken, "token %q (at most %d bytes, no control characters or commas)", job.Token, delay.MaxTokenBytes)
	}
	if max := o.q.Options().MaxPayload; len(job.Payload) > max {
		return bad(delay.ErrPayloadTooLarge, "%d bytes (max %d)", len(job.Payload), max)
	}
	switch {
	case !job.At.IsZero() && job.After != 0:
		return bad(delay.ErrInvalidWhen, "key %q", job.Key)
	case job.After < 0:
		return bad(delay.ErrNegativeDelay, "%v", job.After)
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
// work again (a task may be delivered twice after Redis lost data).
func (o *Outbox) Done(ctx context.Context, tx pgx.Tx, key, token string) error {
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
	Redis delay.CancelResult // what the queue removed or marked
}

// Cancel marks every pending task of key cancelled in the database (the
// truth, committed first), then cancels them in Redis. If the Redis step
// fails the database already says cancelled; a later Reconcile removes
// the tasks from Redis. A relay batch holding the rows finishes first
// (row locks), so a cancelled row is never relayed afterwards.
func (o *Outbox) Cancel(ctx context.Context, key string) (CancelResult, error) {
	var res CancelResult
	tag, err := o.db.Exec(ctx, `UPDATE `+o.schema+`.delay_outbox SET state = 'cancelled', finished_at = now()
		WHERE queue = $1 AND key = $2 AND state IN ('new', 'relayed')`, o.q.Name(), key)
	if err != nil {
		return res, fmt.Errorf("pg: outbox cancel %q: %w", key, err)
	}
	res.Rows = int(tag.RowsAffected())
	res.Redis, err = o.q.Cancel(ctx, key)
	if err != nil {
		return res, fmt.Errorf("pg: outbox cancel %q in redis (the database says cancelled; Reconcile removes it): %w", key, err)
	}
	return res, nil
}

// RescheduleResult is what Reschedule did in the database and in Redis.
type RescheduleResult struct {
	Rows  int
	Due   time.Time
	Redis delay.RescheduleResult
}

// Reschedule moves every pending task of key to w, in the database first,
// then in Redis. A row not yet relayed goes to Redis with its new time.
func (o *Outbox) Reschedule(ctx context.Context, key string, w delay.When) (RescheduleResult, error) {
	res := RescheduleResult{Due: w.At}
	if !w.At.IsZero() && w.After != 0 || w.After < 0 {
		return res, fmt.Errorf("%w: %w: reschedule %q", ErrBadJob, delay.ErrInvalidWhen, key)
	}
	if w.At.IsZero() {
		res.Due = o.now().Add(w.After)
	}
	tag, err := o.db.Exec(ctx, `UPDATE `+o.schema+`.delay_outbox SET due_at = $3
		WHERE queue = $1 AND key = $2 AND state IN ('new', 'relayed')`, o.q.Name(), key, res.Due)
	if err != nil {
		return res, fmt.Errorf("pg: outbox reschedule %q: %w", key, err)
	}
	res.Rows = int(tag.RowsAffected())
	res.Redis, err = o.q.Reschedule(ctx, key, delay.At(res.Due))
	if err != nil {
		return res, fmt.Errorf("pg: outbox reschedule %q in redis: %w", key, err)
	}
	return res, nil
}

// Purge deletes done, cancelled and refused rows finished before before,
// at most limit of them, and returns how many it deleted.
func (o *Outbox) Purge(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("%w: purge limit %d", ErrInvalidOptions, limit)
	}
	tag, err := o.db.Exec(ctx, `DELETE FROM `+o.schema+`.delay_outbox WHERE id IN (
		SELECT id FROM `+o.schema+`.delay_outbox WHERE queue = $1 AND state IN ('done', 'cancelled', 'refused')
		AND finished_at < $2 ORDER BY id LIMIT $3)`, o.q.Name(), before, limit)
	if err != nil {
		return 0, fmt.Errorf("pg: outbox purge: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
