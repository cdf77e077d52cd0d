package pg

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/tierset/tierset/delay"
)

// RelayOptions configure Outbox.Relay. The zero value is the default.
type RelayOptions struct {
	// Batch is how many rows one relay transaction moves (1..delay.MaxBatch).
	// Default 500.
	Batch int
	// Poll is how long Relay sleeps when it found no new row. Default 100 ms.
	Poll time.Duration
	// RetryMax caps the backoff after an error (it starts at Poll and
	// doubles). Default 5 s.
	RetryMax time.Duration
	// OnError, when set, is told every error Relay retries. Default nil.
	OnError func(error)
	// ReconcileEvery is the period of the compensation pass: Relay runs
	// Outbox.Reconcile over every pending row (before ReconcileHorizon)
	// when it starts and then every ReconcileEvery (from one pass's start
	// to the next; a pass longer than that is followed at once by the
	// next), so a task Redis lost
	// (a FLUSHALL, a failover that dropped writes, a Cancel or Reschedule
	// whose Redis step failed) is back within one period with nothing
	// else called. Relays of one outbox in several processes take turns:
	// a pass runs only when no other is running (an advisory lock tried,
	// not waited for). Negative disables it. Default 5 minutes.
	ReconcileEvery time.Duration
	// ReconcileHorizon bounds the periodic pass to rows due before now +
	// ReconcileHorizon. Default 0: every pending row, whatever its due time.
	ReconcileHorizon time.Duration
	// OnReconcile, when set, is told the result of every periodic pass
	// that ran (errors go to OnError). Default nil.
	OnReconcile func(delay.ReconcileResult)
}

// RelayResult counts what one RelayOnce did.
type RelayResult struct {
	Moved     int // rows added to Redis and marked relayed
	Duplicate int // rows Redis already had (same key and token): marked relayed
	Refused   int // rows the queue refused: marked refused with the reason
}

// Total is the number of rows the batch handled.
func (r RelayResult) Total() int { return r.Moved + r.Duplicate + r.Refused }

// RelayOnce moves at most batch committed 'new' rows to Redis, in id
// order, in one transaction: it locks them (SKIP LOCKED, so relays can run
// side by side), enqueues them with EnqueueBatch using each row's key and
// token, and marks them relayed. If the relay dies after the enqueue and
// before the commit, the rows stay 'new' and the next relay enqueues them
// again, which Redis answers as duplicates: no task is lost or doubled.
func (o *Outbox) RelayOnce(ctx context.Context, batch int) (RelayResult, error) {
	var res RelayResult
	if batch < 1 || batch > delay.MaxBatch {
		return res, invalid("options", "relay batch %d (allowed 1..%d)", batch, delay.MaxBatch)
	}
	tx, err := o.db.Begin(ctx)
	if err != nil {
		return res, fmt.Errorf("pg: relay: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// A running Reconcile holds this lock exclusively: a task relayed
	// between its listing and its removal pass would be removed.
	var free bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock_shared(hashtext($1))`, o.lockName()).Scan(&free); err != nil {
		return res, fmt.Errorf("pg: relay: lock: %w", err)
	}
	if !free {
		return res, nil
	}
	rows, err := tx.Query(ctx, `SELECT id, key, token, payload, due_at FROM `+o.schema+`.delay_outbox
		WHERE queue = $1 AND state = 'new' ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED`, o.q.Name(), batch)
	if err != nil {
		return res, fmt.Errorf("pg: relay: select: %w", err)
	}
	var ids []int64
	var jobs []delay.Job
	for rows.Next() {
		var id int64
		var j delay.Job
		var due time.Time
		if err := rows.Scan(&id, &j.Key, &j.Token, &j.Payload, &due); err != nil {
			rows.Close()
			return res, fmt.Errorf("pg: relay: scan: %w", err)
		}
		j.When = delay.At(due)
		ids = append(ids, id)
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return res, fmt.Errorf("pg: relay: select: %w", err)
	}
	if len(jobs) == 0 {
		return res, nil
	}
	out, err := o.q.EnqueueBatch(ctx, jobs)
	if err != nil {
		return res, fmt.Errorf("pg: relay: %w", err)
	}
	if o.afterEnqueue != nil {
		o.afterEnqueue(len(jobs))
	}
	var relayed []int64
	var refusedIDs []int64
	var reasons []string
	for i, e := range out {
		switch {
		case e.Err != nil:
			refusedIDs = append(refusedIDs, ids[i])
			reasons = append(reasons, e.Err.Error())
		case e.Duplicate:
			res.Duplicate++
			relayed = append(relayed, ids[i])
		default:
			res.Moved++
			relayed = append(relayed, ids[i])
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE `+o.schema+`.delay_outbox SET state = 'relayed', relayed_at = now()
		WHERE id = ANY($1)`, relayed); err != nil {
		return RelayResult{}, fmt.Errorf("pg: relay: mark: %w", err)
	}
	if len(refusedIDs) > 0 {
		if _, err := tx.Exec(ctx, `UPDATE `+o.schema+`.delay_outbox AS o SET state = 'refused', finished_at = now(), last_error = r.reason
			FROM unnest($1::bigint[], $2::text[]) AS r(id, reason) WHERE o.id = r.id`, refusedIDs, reasons); err != nil {
			return RelayResult{}, fmt.Errorf("pg: relay: mark refused: %w", err)
		}
		res.Refused = len(refusedIDs)
	}
	if err := tx.Commit(ctx); err != nil {
		return RelayResult{}, fmt.Errorf("pg: relay: commit: %w", err)
	}
	return res, nil
}

// Relay runs RelayOnce until ctx ends: back to back while batches come
// full, sleeping Poll when none is pending, backing off after an error. It
// returns ctx's error.
func (o *Outbox) Relay(ctx context.Context, opts RelayOptions) error {
	opts.Batch = cmp.Or(opts.Batch, 500)
	opts.Poll = cmp.Or(opts.Poll, 100*time.Millisecond)
	opts.RetryMax = cmp.Or(opts.RetryMax, 5*time.Second)
	opts.ReconcileEvery = cmp.Or(opts.ReconcileEvery, 5*time.Minute)
	if opts.Batch < 1 || opts.Batch > delay.MaxBatch || opts.Poll < 0 || opts.RetryMax < 0 || opts.ReconcileHorizon < 0 {
		return invalid("options", "relay batch %d (allowed 1..%d), poll %v, retry max %v, reconcile horizon %v (want non-negative)",
			opts.Batch, delay.MaxBatch, opts.Poll, opts.RetryMax, opts.ReconcileHorizon)
	}
	onError := func(err error) {
		if opts.OnError != nil {
			opts.OnError(err)
		}
	}
	backoff := opts.Poll
	var nextReconcile time.Time // zero: at start
	for {
		if opts.ReconcileEvery > 0 && !time.Now().Before(nextReconcile) {
			// Periods count from each pass's start, so whenever Redis loses
			// data the next pass starts within one period.
			due := nextReconcile
			nextReconcile = time.Now().Add(opts.ReconcileEvery)
			res, ran, err := o.reconcileTurn(ctx, due, opts.ReconcileHorizon)
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case err != nil:
				onError(err)
			case ran && opts.OnReconcile != nil:
				opts.OnReconcile(res)
			}
		}
		res, err := o.RelayOnce(ctx, opts.Batch)
		wait := time.Duration(0)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			onError(err)
			wait = backoff
			backoff = min(2*backoff, opts.RetryMax)
		case res.Total() < opts.Batch:
			wait, backoff = opts.Poll, opts.Poll
		default:
			backoff = opts.Poll
		}
		if opts.ReconcileEvery > 0 {
			wait = min(wait, max(0, time.Until(nextReconcile)))
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// reconcileTurn runs Reconcile over rows due before now+horizon (every
// row when horizon is 0) unless another process's pass is running (ran
// false then). due is when the pass was due (zero for the first).
func (o *Outbox) reconcileTurn(ctx context.Context, due time.Time, horizon time.Duration) (res delay.ReconcileResult, ran bool, err error) {
	tx, err := o.db.Begin(ctx)
	if err != nil {
		return res, false, fmt.Errorf("pg: periodic reconcile: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var mine bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtext($1))`, o.lockName()+".periodic").Scan(&mine); err != nil {
		return res, false, fmt.Errorf("pg: periodic reconcile: lock: %w", err)
	}
	if !mine {
		return res, false, nil
	}
	if o.reconcileStarted != nil {
		o.reconcileStarted(due)
	}
	before := o.q.Options().Codec.MaxTime() // DueBound takes before-1 ms: in range
	if horizon > 0 {
		before = o.now().Add(horizon)
	}
	res, err = o.Reconcile(ctx, before, delay.ReconcileOptions{})
	if err != nil {
		return res, true, fmt.Errorf("pg: periodic reconcile: %w", err)
	}
	return res, true, nil
}

func (o *Outbox) lockName() string { return "tierset.outbox." + o.schema + "." + o.q.Name() }

// Reconcile runs delay.Queue.Reconcile with the outbox as the source,
// holding every relay of this outbox off (a PostgreSQL advisory lock, so
// relays in other processes too) for its duration. delay.Queue.Reconcile
// alone already keeps tasks enqueued after its listing began; the lock
// also keeps a relay's half-marked batch out of the listing, so the counts
// it reports are exact. Relays resume when it returns; Cancel and
// Reschedule wait for it. The rows are the truth for due times too: opts.MoveDue
// is set, so a task whose due time differs from its row's (a
// Reschedule whose Redis step failed) is moved to the row's time, unless
// it was delivered already (then its retry keeps its own time).
func (o *Outbox) Reconcile(ctx context.Context, before time.Time, opts delay.ReconcileOptions) (delay.ReconcileResult, error) {
	opts.MoveDue = true
	tx, err := o.db.Begin(ctx)
	if err != nil {
		return delay.ReconcileResult{}, fmt.Errorf("pg: reconcile: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, o.lockName()); err != nil {
		return delay.ReconcileResult{}, fmt.Errorf("pg: reconcile: lock: %w", err)
	}
	return o.q.Reconcile(ctx, o.Source(), before, opts)
}

// Source lists an outbox's pending rows ('new' and 'relayed') for
// delay.Queue.Reconcile (use Outbox.Reconcile while relays run). Rows marked done, cancelled or refused are not
// listed, so Reconcile removes their tasks from Redis if still pending
// there, and never adds them back.
type Source struct{ o *Outbox }

var _ delay.Source = Source{}

// Source returns the outbox's delay.Source.
func (o *Outbox) Source() Source { return Source{o} }

// Pending implements delay.Source; the cursor is the last row id listed.
func (s Source) Pending(ctx context.Context, before time.Time, cursor string, limit int) ([]delay.Job, string, error) {
	after := int64(0)
	if cursor != "" {
		v, err := strconv.ParseInt(cursor, 10, 64)
		if err != nil {
			return nil, "", invalid("cursor", "cursor %q (want a row id)", cursor)
		}
		after = v
	}
	if limit <= 0 {
		return nil, "", invalid("limit", "limit %d (want at least 1)", limit)
	}
	o := s.o
	rows, err := o.db.Query(ctx, `SELECT id, key, token, payload, due_at FROM `+o.schema+`.delay_outbox
		WHERE queue = $1 AND state IN ('new', 'relayed') AND due_at < $2 AND id > $3 ORDER BY id LIMIT $4`,
		o.q.Name(), before, after, limit)
	if err != nil {
		return nil, "", fmt.Errorf("pg: source: %w", err)
	}
	defer rows.Close()
	var out []delay.Job
	var last int64
	for rows.Next() {
		var t delay.Job
		if err := rows.Scan(&last, &t.Key, &t.Token, &t.Payload, &t.At); err != nil {
			return nil, "", fmt.Errorf("pg: source: scan: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("pg: source: %w", err)
	}
	if len(out) < limit {
		return out, "", nil
	}
	return out, strconv.FormatInt(last, 10), nil
}
