package pg

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delayraw"
	"github.com/tierset/tierset/internal/testredis"
)

// The relay child: the test binary re-executed with these variables set
// runs a relay instead of the tests (see TestMain).
const (
	envRelayChild  = "TIERSET_PG_RELAY_CHILD" // the schema
	envRelayRedis  = "TIERSET_PG_RELAY_REDIS" // host:port
	envRelayHangAt = "TIERSET_PG_RELAY_HANG"  // batch number after whose enqueue to hang; 0 = drain and exit
	relayBatch     = 500
)

func TestMain(m *testing.M) {
	if schema := os.Getenv(envRelayChild); schema != "" {
		os.Exit(relayChild(schema))
	}
	os.Exit(m.Run())
}

// relayChild relays schema's outbox to the Redis at envRelayRedis. With a
// hang batch it prints "ENQUEUED n" once that batch is in Redis, before
// its rows are marked, and waits to be killed; otherwise it relays until
// nothing is left and prints "DRAINED moved dup refused".
func relayChild(schema string) int {
	ctx := context.Background()
	hangAt, _ := strconv.Atoi(os.Getenv(envRelayHangAt))
	pool, err := pgxpool.New(ctx, os.Getenv(EnvPGURL))
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	q, err := delay.New(redis.NewClient(&redis.Options{Addr: os.Getenv(envRelayRedis), ContextTimeoutEnabled: true}), "orders", delay.Options{})
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	o, err := NewOutbox(pool, schema, q, OutboxOptions{})
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	batches := 0
	o.afterEnqueue = func(n int) {
		batches++
		if batches == hangAt {
			fmt.Printf("ENQUEUED %d\n", n)
			select {} // mid-batch: in Redis, not marked; SIGKILL comes here
		}
	}
	var total RelayResult
	for {
		res, err := o.RelayOnce(ctx, relayBatch)
		if err != nil {
			fmt.Println("ERROR", err)
			return 1
		}
		total.Moved += res.Moved
		total.Duplicate += res.Duplicate
		total.Refused += res.Refused
		if res.Total() == 0 {
			fmt.Printf("DRAINED %d %d %d\n", total.Moved, total.Duplicate, total.Refused)
			return 0
		}
	}
}

// placeOrders commits n orders, each with its cancel-after task in the
// same transaction, plus n/10 orders whose transaction rolls back after
// enqueueing. It returns the orders per second.
func placeOrders(t *testing.T, pool *pgxpool.Pool, schema string, o *Outbox, n int, due func(i int) time.Time) float64 {
	t.Helper()
	ctx := testCtx(t, 5*time.Minute)
	if _, err := pool.Exec(ctx, `CREATE TABLE `+schema+`.orders (id bigint PRIMARY KEY, status text NOT NULL DEFAULT 'open', cancels int NOT NULL DEFAULT 0)`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	var next atomic.Int64
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n+n/10 {
					return
				}
				if err := placeOne(ctx, pool, schema, o, i, i >= n, due(i%n)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return float64(n) / time.Since(start).Seconds()
}

func placeOne(ctx context.Context, pool *pgxpool.Pool, schema string, o *Outbox, i int, rollback bool, due time.Time) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `INSERT INTO `+schema+`.orders (id) VALUES ($1)`, i); err != nil {
		return err
	}
	key := "order:" + strconv.Itoa(i)
	if rollback {
		key = "rolledback:" + strconv.Itoa(i)
	}
	if _, err := o.Enqueue(ctx, tx, delay.Job{Key: key, Token: "cancel-after", Payload: []byte(strconv.Itoa(i)), When: delay.At(due)}); err != nil {
		return err
	}
	if rollback {
		return tx.Rollback(ctx)
	}
	return tx.Commit(ctx)
}

// takeAll takes every due task and counts them per key.
func takeAll(t *testing.T, q *delay.Queue) map[string]int {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	seen := map[string]int{}
	for {
		b, err := delayraw.Take(ctx, q, delay.MaxBatch)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			return seen
		}
		for _, task := range b {
			seen[task.Key]++
		}
	}
}

// TestFaultOutboxRelaySIGKILL kills the relay process with SIGKILL after
// a batch reached Redis and before its rows were marked, restarts it, and
// checks every committed order's task is in Redis exactly once and no
// rolled-back one is.
func TestFaultOutboxRelaySIGKILL(t *testing.T) {
	pool, schema := testDB(t)
	q, srv := testQueue(t, delay.Options{})
	o, _ := NewOutbox(pool, schema, q, OutboxOptions{})
	const orders = 10_000
	past := time.Now().Add(-time.Second)
	rate := placeOrders(t, pool, schema, o, orders, func(int) time.Time { return past })
	if n := countRows(t, o, `true`); n != orders {
		t.Fatalf("%d outbox rows after %d committed and %d rolled-back orders, want %d", n, orders, orders/10, orders)
	}

	child := func(hang int) (*exec.Cmd, *bufio.Scanner) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envRelayChild+"="+schema, envRelayRedis+"="+srv.Addr(), envRelayHangAt+"="+strconv.Itoa(hang))
		cmd.Stderr = os.Stderr
		out := testredis.StartChildPipe(t, cmd, cmd.StdoutPipe)
		return cmd, bufio.NewScanner(out)
	}
	const hangAt = 5
	cmd, lines := child(hangAt)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "ENQUEUED ") {
		t.Fatalf("relay child said %q (%v), want ENQUEUED", lines.Text(), lines.Err())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	relayed, left := countRows(t, o, `state = 'relayed'`), countRows(t, o, `state = 'new'`)
	if relayed != (hangAt-1)*relayBatch || left != orders-relayed {
		t.Fatalf("after the kill: %d relayed, %d new; want %d relayed (the killed batch unmarked)", relayed, left, (hangAt-1)*relayBatch)
	}

	start := time.Now()
	_, lines = child(0)
	if !lines.Scan() {
		t.Fatalf("restarted relay said nothing: %v", lines.Err())
	}
	var moved, dup, refused int
	if _, err := fmt.Sscanf(lines.Text(), "DRAINED %d %d %d", &moved, &dup, &refused); err != nil {
		t.Fatalf("restarted relay said %q", lines.Text())
	}
	drain := time.Since(start)
	if dup != relayBatch || moved != left-relayBatch || refused != 0 {
		t.Errorf("restarted relay: moved %d, duplicate %d, refused %d; want %d, %d, 0", moved, dup, refused, left-relayBatch, relayBatch)
	}
	if n := countRows(t, o, `state <> 'relayed'`); n != 0 {
		t.Errorf("%d rows not relayed after the restart", n)
	}
	seen := takeAll(t, q)
	lost, doubled := 0, 0
	for i := range orders {
		switch seen["order:"+strconv.Itoa(i)] {
		case 0:
			lost++
		case 1:
		default:
			doubled++
		}
	}
	rolledBack := 0
	for k := range seen {
		if strings.HasPrefix(k, "rolledback:") {
			rolledBack++
		}
	}
	t.Logf("relay SIGKILL: %d orders committed (%.0f orders/s, 16 writers), %d rolled back; killed after batch %d reached Redis unmarked; restart: moved %d, duplicate %d in %v; Redis: %d tasks, lost %d, doubled %d, rolled-back present %d",
		orders, rate, orders/10, hangAt, moved, dup, drain.Round(time.Millisecond), len(seen), lost, doubled, rolledBack)
	if lost != 0 || doubled != 0 || rolledBack != 0 || len(seen) != orders {
		t.Fatalf("lost %d, doubled %d, rolled-back tasks present %d, tasks %d; want 0, 0, 0, %d", lost, doubled, rolledBack, len(seen), orders)
	}
}

// TestFaultOutboxFlushAllReconcile runs relay and worker while orders are
// due, FLUSHALLs the (private) Redis mid-run, reconciles from the outbox,
// and checks every order was cancelled exactly once and nothing was lost.
func TestFaultOutboxFlushAllReconcile(t *testing.T) {
	pool, schema := testDB(t)
	q, srv := testQueue(t, delay.Options{Lease: 5 * time.Second})
	o, _ := NewOutbox(pool, schema, q, OutboxOptions{})
	const orders = 10_000
	ctx, stop := context.WithCancel(testCtx(t, 6*time.Minute))
	defer stop()

	var effects, skipped atomic.Int64
	third := make(chan struct{}) // closed when a third of the orders are cancelled
	handler := func(ctx context.Context, task *delay.Task) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if err := o.Done(ctx, tx, task.Key, task.Token); errors.Is(err, ErrNotPending) {
			skipped.Add(1) // delivered again after its row was done: do nothing
			return nil
		} else if err != nil {
			return err
		}
		id, _ := strconv.Atoi(string(task.Payload))
		if _, err := tx.Exec(ctx, `UPDATE `+schema+`.orders SET status = 'cancelled', cancels = cancels + 1 WHERE id = $1`, id); err != nil {
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		if effects.Add(1) == orders/3 {
			close(third)
		}
		return nil
	}
	w, err := delay.NewPool(delay.PoolOptions{Concurrency: 16, WakeClient: srv.Client(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(q, handler, delay.QueueOptions{}); err != nil {
		t.Fatal(err)
	}
	var bg sync.WaitGroup
	bg.Go(func() { _ = w.Run(ctx) })
	bg.Go(func() { _ = o.Relay(ctx, RelayOptions{Batch: relayBatch, Poll: 20 * time.Millisecond}) })
	defer bg.Wait()
	defer stop()

	// The flush comes while orders are still being placed and tasks are
	// pending, relayed and in flight.
	type flushed struct {
		atFlush, pendingRows int64
		res                  delay.ReconcileResult
		err                  error
	}
	flushDone := make(chan flushed, 1)
	go func() {
		var f flushed
		defer func() { flushDone <- f }()
		select {
		case <-third:
		case <-ctx.Done():
			f.err = ctx.Err()
			return
		}
		f.atFlush = effects.Load()
		if f.err = srv.Client(nil).FlushAll(ctx).Err(); f.err != nil {
			return
		}
		if f.err = pool.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.delay_outbox WHERE state IN ('new', 'relayed')`).Scan(&f.pendingRows); f.err != nil {
			return
		}
		f.res, f.err = o.Reconcile(ctx, time.Now().Add(time.Hour), delay.ReconcileOptions{})
	}()
	rate := placeOrders(t, pool, schema, o, orders, func(int) time.Time { return time.Now().Add(time.Second) })
	var f flushed
	select {
	case f = <-flushDone:
	case <-time.After(time.Minute):
		t.Fatalf("no flush a minute after the orders were placed (%d cancelled)", effects.Load())
	}
	if f.err != nil {
		t.Fatal(f.err)
	}
	res := f.res
	deadline := time.Now().Add(time.Minute)
	for countRows(t, o, `state IN ('new', 'relayed')`) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d rows still pending a minute after the flush (reconcile: %+v)", countRows(t, o, `state IN ('new', 'relayed')`), res)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var notOnce, notCancelled int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE cancels <> 1), count(*) FILTER (WHERE status <> 'cancelled') FROM `+schema+`.orders`).Scan(&notOnce, &notCancelled); err != nil {
		t.Fatal(err)
	}
	done := countRows(t, o, `state = 'done'`)
	t.Logf("FLUSHALL mid-run: %d orders (%.0f orders/s placed), flushed after %d cancelled with %d rows pending; reconcile listed %d, re-added %d, present %d, removed %d; after: %d done, lost %d, cancelled more than once %d, redeliveries of done rows (skipped by the handler) %d",
		orders, rate, f.atFlush, f.pendingRows, res.Listed, res.Added, res.Present, res.Removed, done, orders-done, notOnce, skipped.Load())
	if done != orders || notOnce != 0 || notCancelled != 0 || effects.Load() != orders {
		t.Fatalf("done %d, cancels≠1 %d, not cancelled %d, effects %d; want %d, 0, 0, %d", done, notOnce, notCancelled, effects.Load(), orders, orders)
	}
	if res.Added == 0 || res.Removed != 0 {
		t.Fatalf("reconcile added %d, removed %d: want the lost tasks re-added and nothing removed", res.Added, res.Removed)
	}
}
