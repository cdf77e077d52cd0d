package pg

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delayraw"
)

// enqueueCommitted writes one outbox row in its own transaction.
func enqueueCommitted(ctx context.Context, o *Outbox, job delay.Job) error {
	tx, err := o.db.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := o.Enqueue(ctx, tx, job); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// redisDue returns the due time of each pending task of key in Redis, by token.
func redisDue(t *testing.T, q *delay.Queue, key string) map[string]time.Time {
	t.Helper()
	infos, err := tasksOf(t.Context(), q, key)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Time{}
	for _, ti := range infos {
		if ti.State != delay.StateDue && ti.State != delay.StateScheduled {
			t.Fatalf("task %s of %q is %s, want pending", ti.Token, key, ti.State)
		}
		out[ti.Token] = ti.When
	}
	return out
}

// rowDue returns the due time of each pending row of key, by token.
func rowDue(t *testing.T, o *Outbox, key string) map[string]time.Time {
	t.Helper()
	rows, err := o.db.Query(t.Context(), `SELECT token, due_at FROM `+o.schema+`.delay_outbox
		WHERE key = $1 AND state IN ('new', 'relayed')`, key)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var tok string
		var due time.Time
		if err := rows.Scan(&tok, &due); err != nil {
			t.Fatal(err)
		}
		out[tok] = due
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFaultOutboxCancelRescheduleOnlyTheirRows gates Cancel and Reschedule
// between their row update and their Redis step, and there enqueues and
// relays a second task of the same key: it must survive, due at its row's
// time, while the first task is cancelled or moved.
func TestFaultOutboxCancelRescheduleOnlyTheirRows(t *testing.T) {
	t.Parallel()
	o, q, _ := testOutbox(t, delay.Options{})
	ctx := testCtx(t, time.Minute)
	base := time.Now().Truncate(time.Millisecond)
	later := base.Add(24 * time.Hour)
	tests := []struct {
		name string
		act  func(key string) (rows int, redis int, err error)
		want map[string]time.Time // Redis and rows afterwards, by token
	}{
		{"cancel", func(key string) (int, int, error) {
			r, err := o.Cancel(ctx, key)
			return r.Rows, r.Redis.Found, err
		}, map[string]time.Time{"new": base.Add(time.Minute)}},
		{"reschedule", func(key string) (int, int, error) {
			r, err := o.Reschedule(ctx, key, delay.At(later))
			return r.Rows, r.Redis.Moved, err
		}, map[string]time.Time{"old": later, "new": base.Add(time.Minute)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "order:" + tt.name
			if err := enqueueCommitted(ctx, o, delay.Job{Key: key, Token: "old", When: delay.At(base.Add(time.Hour))}); err != nil {
				t.Fatal(err)
			}
			if res, err := o.RelayOnce(ctx, 10); err != nil || res.Moved != 1 {
				t.Fatalf("relay of the first task = %+v, %v", res, err)
			}
			reached := make(chan []string, 1)
			resume := make(chan struct{})
			o.afterRows = func(tokens []string) {
				reached <- tokens
				<-resume
			}
			defer func() { o.afterRows = nil }()
			type outcome struct {
				rows, redis int
				err         error
			}
			done := make(chan outcome, 1)
			go func() {
				rows, redis, err := tt.act(key)
				done <- outcome{rows, redis, err}
			}()
			var tokens []string
			select {
			case tokens = <-reached:
			case <-ctx.Done():
				t.Fatal("the call never reached its Redis step")
			}
			// Between the row update and the Redis step: a new task of the
			// same key is committed and relayed.
			errc := make(chan error, 1)
			go func() {
				if err := enqueueCommitted(ctx, o, delay.Job{Key: key, Token: "new", When: delay.At(base.Add(time.Minute))}); err != nil {
					errc <- err
					return
				}
				res, err := o.RelayOnce(ctx, 10)
				if err == nil && res.Moved != 1 {
					err = errors.New("the new task was not relayed while the call was held")
				}
				errc <- err
			}()
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			close(resume)
			got := <-done
			if got.err != nil || got.rows != 1 || got.redis != 1 || len(tokens) != 1 || tokens[0] != "old" {
				t.Fatalf("%s = %d rows (tokens %q), %d Redis tasks, %v; want 1 row (old), 1 task", tt.name, got.rows, tokens, got.redis, got.err)
			}
			inRedis, inRows := redisDue(t, q, key), rowDue(t, o, key)
			t.Logf("%s held between its row update and its Redis step while a new task was relayed: Redis %v, rows %v", tt.name, inRedis, inRows)
			for _, got := range []map[string]time.Time{inRedis, inRows} {
				if len(got) != len(tt.want) {
					t.Fatalf("after %s: Redis %v, rows %v; want both %v", tt.name, inRedis, inRows, tt.want)
				}
				for tok, due := range tt.want {
					if !got[tok].Equal(due) {
						t.Fatalf("after %s: Redis %v, rows %v; want both %v", tt.name, inRedis, inRows, tt.want)
					}
				}
			}
		})
	}
}

// TestOutboxReconcileMovesDue: Reconcile moves a task whose due time in
// Redis differs from its row's (a Reschedule whose commit failed after
// its Redis step), and leaves a retried task at its retry's time.
func TestOutboxReconcileMovesDue(t *testing.T) {
	t.Parallel()
	o, q, _ := testOutbox(t, delay.Options{})
	ctx := testCtx(t, time.Minute)
	due := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	if err := enqueueCommitted(ctx, o, delay.Job{Key: "drifted", Token: "t", When: delay.At(due)}); err != nil {
		t.Fatal(err)
	}
	if err := enqueueCommitted(ctx, o, delay.Job{Key: "retried", Token: "t", When: delay.At(time.Now().Add(-time.Second))}); err != nil {
		t.Fatal(err)
	}
	if res, err := o.RelayOnce(ctx, 10); err != nil || res.Moved != 2 {
		t.Fatalf("relay = %+v, %v", res, err)
	}
	if _, err := q.Reschedule(ctx, delay.Selector{Key: "drifted", Token: "t"}, delay.At(due.Add(24*time.Hour))); err != nil {
		t.Fatal(err)
	}
	b, err := delayraw.Take(ctx, q, 1)
	if err != nil || len(b) != 1 || b[0].Key != "retried" {
		t.Fatalf("Take = %+v, %v; want the retried task", b, err)
	}
	if _, err := delayraw.RetryAfter(ctx, q, b[0], 2*time.Hour, errors.New("boom")); err != nil {
		t.Fatal(err)
	}
	retryDue := redisDue(t, q, "retried")["t"]
	res, err := o.Reconcile(ctx, time.Now().Add(48*time.Hour), delay.ReconcileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("reconcile: %+v", res)
	if res.Moved != 1 || res.Present != 2 || res.Added != 0 || res.Removed != 0 {
		t.Fatalf("reconcile = %+v; want 1 moved of 2 present", res)
	}
	if got := redisDue(t, q, "drifted")["t"]; !got.Equal(due) {
		t.Fatalf("drifted task due %v after reconcile, want its row's %v", got, due)
	}
	if got := redisDue(t, q, "retried")["t"]; !got.Equal(retryDue) {
		t.Fatalf("retried task due %v after reconcile, want its retry's %v", got, retryDue)
	}
}

// TestFaultOutboxPeriodicReconcileAfterFlushAll: a relay left alone puts
// every pending row's task back within one ReconcileEvery of a FLUSHALL
// of its (private) Redis; nothing else is called.
func TestFaultOutboxPeriodicReconcileAfterFlushAll(t *testing.T) {
	t.Parallel()
	o, q, srv := testOutbox(t, delay.Options{})
	const rows, period = 200, 2 * time.Second
	ctx, stop := context.WithCancel(testCtx(t, 2*time.Minute))
	defer stop()
	base := time.Now().Add(time.Hour)
	for i := range rows {
		key := "order:" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if err := enqueueCommitted(ctx, o, delay.Job{Key: key, Token: "t", When: delay.At(base.Add(time.Duration(i) * time.Second))}); err != nil {
			t.Fatal(err)
		}
	}
	type start struct{ due, started time.Time }
	type pass struct {
		start
		at  time.Time
		res delay.ReconcileResult
	}
	passes := make(chan pass, 100)
	starts := make(chan start, 100)
	o.reconcileStarted = func(due time.Time) { starts <- start{due, time.Now()} }
	latestStart := func() start { // the pass just ended began last
		var last start
		for {
			select {
			case st := <-starts:
				last = st
			default:
				return last
			}
		}
	}
	relayErr := make(chan error, 1)
	go func() {
		relayErr <- o.Relay(ctx, RelayOptions{Poll: 20 * time.Millisecond, ReconcileEvery: period,
			OnReconcile: func(r delay.ReconcileResult) { passes <- pass{latestStart(), time.Now(), r} },
			OnError:     func(err error) { t.Log("relay:", err) }})
	}()
	defer func() {
		stop()
		if err := <-relayErr; !errors.Is(err, context.Canceled) {
			t.Errorf("Relay = %v, want context.Canceled", err)
		}
	}()
	deadline := time.Now().Add(time.Minute)
	for countRows(t, o, `state = 'relayed'`) < rows {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d rows relayed after a minute", countRows(t, o, `state = 'relayed'`), rows)
		}
		time.Sleep(10 * time.Millisecond)
	}
	flushed := time.Now()
	if err := srv.Client(nil).FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// The first pass that started after the flush; one running across it
	// may have put back only part.
	var p pass
	for p.started.Before(flushed) {
		select {
		case p = <-passes:
		case <-time.After(period + 30*time.Second):
			t.Fatalf("no reconcile pass within %v of the flush", period+30*time.Second)
		}
	}
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("FLUSHALL of %d relayed tasks, then nothing called: the relay's next periodic pass (every %v) was due %v after the flush, started %v after it and had them back %v after it: %+v; Redis then holds %d pending",
		rows, period, p.due.Sub(flushed).Round(time.Millisecond), p.started.Sub(flushed).Round(time.Millisecond), p.at.Sub(flushed).Round(time.Millisecond), p.res, st.Pending)
	if st.Pending != rows {
		t.Fatalf("after the pass Redis holds %d pending; want %d", st.Pending, rows)
	}
	// The pass is due one period after the previous one started, which
	// was before the flush: exactly within one period. When it starts
	// after that depends on the relay batch in progress and the machine's
	// load (3.2 s once at load 25), so only its due time is judged.
	if d := p.due.Sub(flushed); d > period {
		t.Fatalf("the pass after the flush was due %v after it, want within one period (%v)", d, period)
	}
}

// TestOutboxPeriodicReconcileOneAtATime: a periodic pass does not run
// while another process holds the turn.
func TestOutboxPeriodicReconcileOneAtATime(t *testing.T) {
	t.Parallel()
	o, _, _ := testOutbox(t, delay.Options{})
	ctx := testCtx(t, time.Minute)
	tx, err := o.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, o.lockName()+".periodic"); err != nil {
		t.Fatal(err)
	}
	if _, ran, err := o.reconcileTurn(ctx, time.Time{}, 0); err != nil || ran {
		t.Fatalf("reconcileTurn while another process holds the turn: ran %v, %v; want skipped", ran, err)
	}
	_ = tx.Rollback(ctx)
	if _, ran, err := o.reconcileTurn(ctx, time.Time{}, 0); err != nil || !ran {
		t.Fatalf("reconcileTurn after the turn was released: ran %v, %v; want ran", ran, err)
	}
}
