package pg

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/testredis"
)

// testQueue returns a delay queue on a private redis-server (tests here
// flush and kill it), and the server.
func testQueue(t testing.TB, opts delay.Options) (*delay.Queue, *testredis.Server) {
	t.Helper()
	srv := testredis.StartServer(t)
	c := srv.Client(&redis.Options{PoolSize: 32})
	q, err := delay.New(c, "orders", opts)
	if err != nil {
		t.Fatal(err)
	}
	return q, srv
}

// testOutbox is an Outbox on a fresh schema (o.db, o.schema) over the
// queue "orders" with opts on a private Redis, srv.
func testOutbox(t testing.TB, opts delay.Options) (o *Outbox, q *delay.Queue, srv *testredis.Server) {
	t.Helper()
	pool, schema := testDB(t)
	q, srv = testQueue(t, opts)
	o, err := NewOutbox(pool, schema, q, OutboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return o, q, srv
}

func countRows(t testing.TB, o *Outbox, where string, args ...any) int {
	t.Helper()
	var n int
	if err := o.db.QueryRow(t.Context(), `SELECT count(*) FROM `+o.schema+`.delay_outbox WHERE `+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestOutboxEnqueue(t *testing.T) {
	pool, schema := testDB(t)
	q, _ := testQueue(t, delay.Options{MaxPayload: 16})
	o, err := NewOutbox(pool, schema, q, OutboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 30*time.Second)
	tests := []struct {
		name     string
		job      delay.Job
		rollback bool
		want     *delay.ValidationError // nil: the row exists after commit
	}{
		{"committed", delay.Job{Key: "order:1", Token: "t1", When: delay.After(time.Minute)}, false, nil},
		{"same key and token again", delay.Job{Key: "order:1", Token: "t1", When: delay.After(time.Hour)}, false, nil},
		{"generated token", delay.Job{Key: "order:2", When: delay.At(time.Now())}, false, nil},
		{"rolled back", delay.Job{Key: "order:3", Token: "t3"}, true, nil},
		{"empty key", delay.Job{Token: "x"}, false, &delay.ValidationError{Field: "key"}},
		{"control character in key", delay.Job{Key: "a\nb"}, false, &delay.ValidationError{Field: "key"}},
		{"comma in token", delay.Job{Key: "k", Token: "a,b"}, false, &delay.ValidationError{Field: "token"}},
		{"payload too large", delay.Job{Key: "k", Payload: make([]byte, 17)}, false, &delay.ValidationError{Field: "payload"}},
		{"At and After", delay.Job{Key: "k", When: delay.When{At: time.Now(), After: time.Second}}, false, &delay.ValidationError{Field: "when"}},
		{"negative After", delay.Job{Key: "k", When: delay.After(-time.Second)}, false, &delay.ValidationError{Field: "delay"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			tok, err := o.Enqueue(ctx, tx, tt.job)
			if tt.want != nil {
				_ = tx.Rollback(ctx)
				if !errors.Is(err, &ValidationError{Field: tt.want.Field}) || !errors.Is(err, ErrInvalid) || !errors.Is(err, tt.want) {
					t.Fatalf("Enqueue = %v, want a pg and a delay *ValidationError with Field %q", err, tt.want.Field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.rollback {
				_ = tx.Rollback(ctx)
			} else if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			n := countRows(t, o, `key = $1 AND token = $2`, tt.job.Key, tok)
			if want := map[bool]int{false: 1, true: 0}[tt.rollback]; n != want {
				t.Fatalf("%d rows for (%s, %s), want %d", n, tt.job.Key, tok, want)
			}
		})
	}
	if n := countRows(t, o, `true`); n != 2 {
		t.Errorf("%d rows in all, want 2 (order:1 once, order:2)", n)
	}
}

func TestOutboxRelayCancelReschedule(t *testing.T) {
	pool, schema := testDB(t)
	q, _ := testQueue(t, delay.Options{})
	o, err := NewOutbox(pool, schema, q, OutboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 30*time.Second)
	due := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	tx, _ := pool.Begin(ctx)
	for _, k := range []string{"a", "b", "c"} {
		if _, err := o.Enqueue(ctx, tx, delay.Job{Key: k, Token: "t-" + k, Payload: []byte(k), When: delay.At(due)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := o.RelayOnce(ctx, 2)
	if err != nil || res.Moved != 2 {
		t.Fatalf("RelayOnce(2) = %+v, %v; want 2 moved", res, err)
	}
	res, err = o.RelayOnce(ctx, 2)
	if err != nil || res.Moved != 1 {
		t.Fatalf("second RelayOnce = %+v, %v; want 1 moved", res, err)
	}
	if n := countRows(t, o, `state = 'relayed'`); n != 3 {
		t.Fatalf("%d relayed rows, want 3", n)
	}
	// A relayed row set back to new (a relay that died before its commit) is a duplicate.
	if _, err := pool.Exec(ctx, `UPDATE `+schema+`.delay_outbox SET state = 'new' WHERE key = 'c'`); err != nil {
		t.Fatal(err)
	}
	if res, err := o.RelayOnce(ctx, 10); err != nil || res.Duplicate != 1 || res.Moved != 0 {
		t.Fatalf("relay of an already enqueued row = %+v, %v; want 1 duplicate", res, err)
	}
	if infos, _ := tasksOf(ctx, q, "c"); len(infos) != 1 {
		t.Fatalf("key c has %d tasks in Redis, want 1", len(infos))
	}

	cres, err := o.Cancel(ctx, "a")
	if err != nil || cres.Rows != 1 || cres.Redis.Pending != 1 {
		t.Fatalf("Cancel(a) = %+v, %v; want 1 row and 1 pending task", cres, err)
	}
	if infos, _ := tasksOf(ctx, q, "a"); len(infos) != 0 {
		t.Fatalf("cancelled key a still has %d tasks in Redis", len(infos))
	}
	if n := countRows(t, o, `key = 'a' AND state = 'cancelled'`); n != 1 {
		t.Fatal("key a is not cancelled in the database")
	}
	later := due.Add(time.Hour)
	rres, err := o.Reschedule(ctx, "b", delay.At(later))
	if err != nil || rres.Rows != 1 || rres.Redis.Moved != 1 {
		t.Fatalf("Reschedule(b) = %+v, %v; want 1 row and 1 task moved", rres, err)
	}
	infos, err := tasksOf(ctx, q, "b")
	if err != nil || len(infos) != 1 || !infos[0].When.Equal(later) {
		t.Fatalf("List(b) = %+v, %v; want one task due %v", infos, err, later)
	}
	if n := countRows(t, o, `key = 'b' AND due_at = $1`, later); n != 1 {
		t.Fatal("key b's due time did not change in the database")
	}
	// Cancel before the relay: the row never reaches Redis.
	tx, _ = pool.Begin(ctx)
	if _, err := o.Enqueue(ctx, tx, delay.Job{Key: "d", Token: "t-d", When: delay.At(due)}); err != nil {
		t.Fatal(err)
	}
	_ = tx.Commit(ctx)
	if _, err := o.Cancel(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if res, err := o.RelayOnce(ctx, 10); err != nil || res.Total() != 0 {
		t.Fatalf("relay after cancel = %+v, %v; want nothing to relay", res, err)
	}
	if infos, _ := tasksOf(ctx, q, "d"); len(infos) != 0 {
		t.Fatal("a row cancelled before its relay reached Redis")
	}
	// Done: once, then ErrNotPending.
	tx, _ = pool.Begin(ctx)
	if err := o.Done(ctx, tx, "c", "t-c"); err != nil {
		t.Fatal(err)
	}
	if err := o.Done(ctx, tx, "c", "t-c"); !errors.Is(err, ErrNotPending) {
		t.Fatalf("second Done = %v, want ErrNotPending", err)
	}
	_ = tx.Commit(ctx)
}

func TestOutboxRelayRefusedRow(t *testing.T) {
	pool, schema := testDB(t)
	q, _ := testQueue(t, delay.Options{})
	o, _ := NewOutbox(pool, schema, q, OutboxOptions{})
	ctx := testCtx(t, 30*time.Second)
	// A row written behind the outbox's back with a key the queue refuses.
	if _, err := pool.Exec(ctx, `INSERT INTO `+schema+`.delay_outbox (queue, key, token, due_at) VALUES
		('orders', $1, 't', now()), ('orders', 'good', 't', now())`, strings.Repeat("k", delay.MaxKeyBytes+1)); err != nil {
		t.Fatal(err)
	}
	res, err := o.RelayOnce(ctx, 10)
	if err != nil || res.Moved != 1 || res.Refused != 1 {
		t.Fatalf("RelayOnce = %+v, %v; want 1 moved, 1 refused", res, err)
	}
	var lastErr string
	if err := pool.QueryRow(ctx, `SELECT last_error FROM `+schema+`.delay_outbox WHERE state = 'refused'`).Scan(&lastErr); err != nil || !strings.Contains(lastErr, "key") {
		t.Fatalf("refused row's last_error = %q, %v; want the queue's reason", lastErr, err)
	}
}

// TestOutboxRelayYieldsToReconcile: while Reconcile's lock is held, a
// relay moves nothing (a task relayed between Reconcile's listing and its
// removal pass would be removed); once released, it moves the rows.
func TestOutboxRelayYieldsToReconcile(t *testing.T) {
	pool, schema := testDB(t)
	q, _ := testQueue(t, delay.Options{})
	o, _ := NewOutbox(pool, schema, q, OutboxOptions{})
	ctx := testCtx(t, 30*time.Second)
	tx, _ := pool.Begin(ctx)
	if _, err := o.Enqueue(ctx, tx, delay.Job{Key: "k", When: delay.After(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	_ = tx.Commit(ctx)
	hold, _ := pool.Begin(ctx)
	if _, err := hold.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, o.lockName()); err != nil {
		t.Fatal(err)
	}
	if res, err := o.RelayOnce(ctx, 10); err != nil || res.Total() != 0 {
		t.Fatalf("RelayOnce during a reconcile = %+v, %v; want nothing moved", res, err)
	}
	_ = hold.Rollback(ctx)
	if res, err := o.RelayOnce(ctx, 10); err != nil || res.Moved != 1 {
		t.Fatalf("RelayOnce after the reconcile = %+v, %v; want 1 moved", res, err)
	}
	res, err := o.Reconcile(ctx, time.Now().Add(2*time.Hour), delay.ReconcileOptions{})
	if err != nil || res.Listed != 1 || res.Present != 1 || res.Removed != 0 {
		t.Fatalf("Reconcile = %+v, %v; want the one task listed and present", res, err)
	}
}

// TestOutboxRelaysSideBySide runs four relays at once over the same rows:
// SKIP LOCKED gives each row to one of them, so every row is moved once.
func TestOutboxRelaysSideBySide(t *testing.T) {
	pool, schema := testDB(t)
	q, _ := testQueue(t, delay.Options{})
	o, _ := NewOutbox(pool, schema, q, OutboxOptions{})
	ctx := testCtx(t, time.Minute)
	const rows = 3000
	if _, err := pool.Exec(ctx, `INSERT INTO `+schema+`.delay_outbox (queue, key, token, due_at)
		SELECT 'orders', 'k' || g, 't', now() + interval '1 hour' FROM generate_series(1, $1) g`, rows); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	results := make([]RelayResult, 4)
	errs := make([]error, 4)
	for i := range results {
		wg.Go(func() {
			for {
				res, err := o.RelayOnce(ctx, 100)
				if err != nil {
					errs[i] = err
					return
				}
				if res.Total() == 0 {
					return
				}
				results[i].Moved += res.Moved
				results[i].Duplicate += res.Duplicate
			}
		})
	}
	wg.Wait()
	moved, dup := 0, 0
	for i := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		moved += results[i].Moved
		dup += results[i].Duplicate
	}
	if moved != rows || dup != 0 || countRows(t, o, `state = 'relayed'`) != rows {
		t.Fatalf("4 relays moved %d, duplicates %d (per relay %+v); want %d moved once each", moved, dup, results, rows)
	}
}

// relayAfterListing is a Source that, once the listing is over, lets a
// relay commit one more row: what a running relay does while a Reconcile
// compares.
type relayAfterListing struct {
	Source
	o *Outbox
	t *testing.T
}

func (r relayAfterListing) Pending(ctx context.Context, before time.Time, cursor string, limit int) ([]delay.Job, string, error) {
	tasks, next, err := r.Source.Pending(ctx, before, cursor, limit)
	if err == nil && next == "" {
		tx, _ := r.o.db.Begin(ctx)
		if _, err := r.o.Enqueue(ctx, tx, delay.Job{Key: "late", Token: "t", When: delay.After(time.Minute)}); err != nil {
			r.t.Error(err)
		}
		_ = tx.Commit(ctx)
		if res, err := r.o.RelayOnce(ctx, 10); err != nil || res.Moved != 1 {
			r.t.Errorf("relay during the reconcile = %+v, %v", res, err)
		}
	}
	return tasks, next, err
}

// TestReconcileWithoutTheRelayLock: even without Outbox.Reconcile's lock,
// delay.Queue.Reconcile keeps a task relayed after its listing (its ID is
// above the mark taken when the listing began), so the pending row keeps
// its task.
func TestReconcileWithoutTheRelayLock(t *testing.T) {
	pool, schema := testDB(t)
	q, _ := testQueue(t, delay.Options{})
	o, _ := NewOutbox(pool, schema, q, OutboxOptions{})
	ctx := testCtx(t, 30*time.Second)
	res, err := q.Reconcile(ctx, relayAfterListing{o.Source(), o, t}, time.Now().Add(time.Hour), delay.ReconcileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	infos, _ := tasksOf(ctx, q, "late")
	t.Logf("unlocked reconcile with a relay between listing and removal: removed %d, newer %d, tasks left for the pending row %d", res.Removed, res.Newer, len(infos))
	if res.Removed != 0 || res.Newer != 1 || len(infos) != 1 || countRows(t, o, `key = 'late' AND state = 'relayed'`) != 1 {
		t.Fatalf("removed %d, newer %d, %d tasks left: a task relayed during the reconcile was removed", res.Removed, res.Newer, len(infos))
	}
}

// tasksOf lists the tasks of a business key (delay.Queue.List by Key).
func tasksOf(ctx context.Context, q *delay.Queue, key string) ([]delay.TaskInfo, error) {
	p, err := q.List(ctx, delay.ListOptions{Key: key})
	return p.Tasks, err
}
