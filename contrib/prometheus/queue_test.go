package prometheus_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	tsprom "github.com/tierset/tierset/contrib/prometheus"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delayraw"
	"github.com/tierset/tierset/internal/keyname"
	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/score"
)

func TestQueueAndDelayCollectorScrape(t *testing.T) {
	b := testredis.Redis(t)
	ctx := t.Context()
	dc := tsprom.NewDelayCollector(tsprom.DelayOptions{})
	q, err := delay.New(b.Client, "orders", delay.Options{Prefix: b.Prefix, Observer: dc.Observer(), MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	qc := tsprom.NewQueueCollector(tsprom.QueueOptions{}, q)
	reg := pedanticRegistry(dc, qc)

	// Six tasks due 5 s ago (lateness in the [4096, 8192) ms bucket), two
	// due in an hour, one duplicate.
	past := time.Now().Add(-5 * time.Second)
	for i := range 6 {
		if _, err := q.Enqueue(ctx, delay.Job{Key: fmt.Sprintf("k%d", i), Token: "t", When: delay.At(past)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if _, err := q.Enqueue(ctx, delay.Job{Key: fmt.Sprintf("later%d", i), When: delay.After(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if e, err := q.Enqueue(ctx, delay.Job{Key: "k0", Token: "t", When: delay.At(past)}); err != nil || !e.Duplicate {
		t.Fatalf("duplicate enqueue: %+v %v", e, err)
	}
	batch, err := delayraw.Take(ctx, q, 10)
	if err != nil || len(batch) != 6 {
		t.Fatalf("take: %d tasks, %v", len(batch), err)
	}
	if errs, err := delayraw.Ack(ctx, q, batch[:3]); err != nil || errors.Join(errs...) != nil { // 3 acked
		t.Fatal(err, errs)
	}
	if _, err := delayraw.Retry(ctx, q, batch[3], errors.New("boom")); err != nil { // MaxAttempts 1: dead
		t.Fatal(err)
	}
	if _, err := delayraw.Kill(ctx, q, batch[4], errors.New("bad")); err != nil { // dead
		t.Fatal(err)
	}
	// batch[5] stays in flight.
	s, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}

	url, _ := scrape(t, reg)
	want := fmt.Sprintf(`
# HELP tierset_queue_tasks Tasks by state; the states do not overlap, so their sum is every task kept: scheduled (pending, not yet due), ready (pending and due), in_flight, dead, done (tombstones).
# TYPE tierset_queue_tasks gauge
tierset_queue_tasks{queue="orders",state="dead"} 2
tierset_queue_tasks{queue="orders",state="done"} 0
tierset_queue_tasks{queue="orders",state="in_flight"} 1
tierset_queue_tasks{queue="orders",state="ready"} 0
tierset_queue_tasks{queue="orders",state="scheduled"} 2
# HELP tierset_queue_up 1 when this scrape read the queue's Health, 0 when the read failed.
# TYPE tierset_queue_up gauge
tierset_queue_up{queue="orders"} 1
# HELP tierset_queue_delivered_total Deliveries since the queue's keys were created (every worker).
# TYPE tierset_queue_delivered_total counter
tierset_queue_delivered_total{queue="orders"} 6
# HELP tierset_queue_acked_total Acks since the queue's keys were created.
# TYPE tierset_queue_acked_total counter
tierset_queue_acked_total{queue="orders"} %d
# HELP tierset_queue_dead_lettered_total Tasks dead-lettered since the queue's keys were created.
# TYPE tierset_queue_dead_lettered_total counter
tierset_queue_dead_lettered_total{queue="orders"} %d
# HELP tierset_delay_enqueued_total Enqueue results seen by this process: new or duplicate.
# TYPE tierset_delay_enqueued_total counter
tierset_delay_enqueued_total{queue="orders",result="duplicate"} 1
tierset_delay_enqueued_total{queue="orders",result="new"} 8
# HELP tierset_delay_delivered_total Tasks this process took.
# TYPE tierset_delay_delivered_total counter
tierset_delay_delivered_total{queue="orders"} 6
# HELP tierset_delay_acked_total Tasks this process acked.
# TYPE tierset_delay_acked_total counter
tierset_delay_acked_total{queue="orders"} 3
# HELP tierset_delay_dead_total Tasks this process dead-lettered.
# TYPE tierset_delay_dead_total counter
tierset_delay_dead_total{queue="orders"} 2
`, s.Acked, s.DeadLettered)
	if s.Acked != 3 || s.DeadLettered != 2 {
		t.Errorf("Stats: acked %d dead-lettered %d, want 3 and 2", s.Acked, s.DeadLettered)
	}
	if err := testutil.ScrapeAndCompare(url, strings.NewReader(want),
		"tierset_queue_tasks", "tierset_queue_up", "tierset_queue_delivered_total", "tierset_queue_acked_total",
		"tierset_queue_dead_lettered_total", "tierset_delay_enqueued_total", "tierset_delay_delivered_total",
		"tierset_delay_acked_total", "tierset_delay_dead_total"); err != nil {
		t.Fatal(err)
	}

	// The lateness histogram: the server's own bounds, every sample in the 5 s bucket.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, mf := range mfs {
		if mf.GetName() != "tierset_queue_lateness_seconds" {
			continue
		}
		found = true
		h := mf.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != 6 {
			t.Errorf("lateness count %d, want 6", h.GetSampleCount())
		}
		bounds := tsprom.LatenessBounds()
		if len(h.GetBucket()) != len(bounds) {
			t.Fatalf("%d buckets, want %d", len(h.GetBucket()), len(bounds))
		}
		for i, bk := range h.GetBucket() {
			if bk.GetUpperBound() != bounds[i] {
				t.Errorf("bucket %d bound %g, want %g", i, bk.GetUpperBound(), bounds[i])
			}
			want := uint64(0)
			if bk.GetUpperBound() >= 8.192 { // 5 s late plus the test's own time, under 3 s
				want = 6
			}
			if bk.GetUpperBound() == 4.096 || bk.GetUpperBound() == 8.192 || bk.GetUpperBound() == 0.001 {
				if bk.GetCumulativeCount() != want {
					t.Errorf("le=%g cumulative %d, want %d", bk.GetUpperBound(), bk.GetCumulativeCount(), want)
				}
			}
		}
	}
	if !found {
		t.Fatal("no tierset_queue_lateness_seconds in the scrape")
	}
}

// TestQueueCollectorDown: a queue whose Stats read fails reports up 0.
func TestQueueCollectorDown(t *testing.T) {
	b := testredis.Redis(t)
	q, err := delay.New(b.Client, "x", delay.Options{Prefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	qc := tsprom.NewQueueCollector(tsprom.QueueOptions{Timeout: time.Nanosecond}, q)
	reg := pedanticRegistry(qc)
	url, _ := scrape(t, reg)
	want := `
# HELP tierset_queue_up 1 when this scrape read the queue's Health, 0 when the read failed.
# TYPE tierset_queue_up gauge
tierset_queue_up{queue="x"} 0
`
	if err := testutil.ScrapeAndCompare(url, strings.NewReader(want), "tierset_queue_up", "tierset_queue_tasks"); err != nil {
		t.Fatal(err)
	}
}

// TestQueueCollectorRetriesExpired: two Retry calls and one lease that
// expires and is swept back show in retries_total and expired_total as
// Stats counts them, and in this process's retries and sweep counters.
func TestQueueCollectorRetriesExpired(t *testing.T) {
	b := testredis.Redis(t)
	ctx := t.Context()
	dc := tsprom.NewDelayCollector(tsprom.DelayOptions{})
	q, err := delay.New(b.Client, "retry-exp", delay.Options{Prefix: b.Prefix, Observer: dc.Observer()})
	if err != nil {
		t.Fatal(err)
	}
	reg := pedanticRegistry(dc, tsprom.NewQueueCollector(tsprom.QueueOptions{}, q))

	past := time.Now().Add(-time.Second)
	for i := range 3 {
		if _, err := q.Enqueue(ctx, delay.Job{Key: fmt.Sprintf("k%d", i), When: delay.At(past)}); err != nil {
			t.Fatal(err)
		}
	}
	batch, err := delayraw.Take(ctx, q, 3)
	if err != nil || len(batch) != 3 {
		t.Fatalf("take: %d tasks, %v", len(batch), err)
	}
	for _, tk := range batch[:2] {
		if out, err := delayraw.Retry(ctx, q, tk, errors.New("boom")); err != nil || out != "retried" {
			t.Fatalf("retry %s: %v %v, want Retried", tk.ID, out, err)
		}
	}
	// The third lease is cut to 1 ms (the queue's own Lease is 30 s) so it
	// expires now; the sweep is polled until it has returned it.
	if _, err := delayraw.Extend(ctx, q, batch[2], time.Millisecond); err != nil {
		t.Fatal(err)
	}
	returned := 0
	deadline := time.Now().Add(10 * time.Second)
	for returned < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the 1 ms lease was not swept back in 10 s")
		}
		r, err := q.Sweep(ctx, delay.MaxBatch)
		if err != nil {
			t.Fatal(err)
		}
		returned += r.Returned
		if r.Dead != 0 {
			t.Fatalf("sweep dead-lettered %d, want none (MaxAttempts is 25)", r.Dead)
		}
		time.Sleep(time.Millisecond)
	}
	s, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Retries != 2 || s.Expired != 1 || s.InFlight != 0 || s.Pending != 3 {
		t.Fatalf("Stats: retries %d expired %d in flight %d pending %d, want 2, 1, 0, 3",
			s.Retries, s.Expired, s.InFlight, s.Pending)
	}

	url, _ := scrape(t, reg)
	want := fmt.Sprintf(`
# HELP tierset_queue_retries_total Retries since the queue's keys were created.
# TYPE tierset_queue_retries_total counter
tierset_queue_retries_total{queue="retry-exp"} %d
# HELP tierset_queue_expired_total Leases that expired and were swept.
# TYPE tierset_queue_expired_total counter
tierset_queue_expired_total{queue="retry-exp"} %d
# HELP tierset_delay_retries_total Tasks this process sent back to due.
# TYPE tierset_delay_retries_total counter
tierset_delay_retries_total{queue="retry-exp"} 2
# HELP tierset_delay_sweep_returned_total Expired leases this process's sweeps returned to due.
# TYPE tierset_delay_sweep_returned_total counter
tierset_delay_sweep_returned_total{queue="retry-exp"} 1
`, s.Retries, s.Expired)
	if err := testutil.ScrapeAndCompare(url, strings.NewReader(want), "tierset_queue_retries_total",
		"tierset_queue_expired_total", "tierset_delay_retries_total", "tierset_delay_sweep_returned_total"); err != nil {
		t.Fatal(err)
	}
}

// TestQueueCollectorLossCounters: each Stats loss counter is scraped,
// equal to Stats, and moves by one when its loss is provoked on real
// Redis the way delay's integrity tests do it: a key of the queue deleted
// behind its back, or (for seq_overflows) two tasks in one millisecond of
// a codec with no sequence bits.
func TestQueueCollectorLossCounters(t *testing.T) {
	b := testredis.Redis(t)
	ctx := t.Context()
	m := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	future := delay.At(m)
	series := func(s delay.Stats) map[string]int64 {
		return map[string]int64{
			"tierset_queue_seq_overflows_total": s.SeqOverflows, "tierset_queue_lost_total": s.Lost,
			"tierset_queue_restored_total": s.Restored, "tierset_queue_id_repairs_total": s.CounterLost,
			"tierset_queue_index_lost_total": s.IndexLost,
		}
	}
	enqueue := func(t *testing.T, q *delay.Queue, j delay.Job) delay.Enqueued {
		t.Helper()
		e, err := q.Enqueue(ctx, j)
		if err != nil {
			t.Fatalf("enqueue %s: %v", j.Key, err)
		}
		return e
	}
	del := func(t *testing.T, keys ...string) {
		t.Helper()
		if n, err := b.Client.Del(ctx, keys...).Result(); err != nil || n != int64(len(keys)) {
			t.Fatalf("DEL %v: %d removed, %v", keys, n, err)
		}
	}
	for _, row := range []struct {
		name    string
		moved   string // the series the loss moves to 1
		codec   bool   // a codec with 0 sequence bits
		provoke func(t *testing.T, q *delay.Queue, key func(suffix string) string)
	}{
		{"seq overflow", "tierset_queue_seq_overflows_total", true, func(t *testing.T, q *delay.Queue, _ func(string) string) {
			enqueue(t, q, delay.Job{Key: "a", When: future})
			if e := enqueue(t, q, delay.Job{Key: "b", When: future}); !e.Due.Equal(m.Add(time.Millisecond)) {
				t.Fatalf("second task due %v, want the next millisecond %v", e.Due, m.Add(time.Millisecond))
			}
		}},
		{"record lost", "tierset_queue_lost_total", false, func(t *testing.T, q *delay.Queue, key func(string) string) {
			enqueue(t, q, delay.Job{Key: "a", When: delay.At(time.Now().Add(-time.Second))})
			buckets, err := b.Client.Keys(ctx, key("tasks:*")).Result()
			if err != nil || len(buckets) == 0 {
				t.Fatalf("record buckets: %v %v", buckets, err)
			}
			del(t, buckets...)
			if _, err := delayraw.Take(ctx, q, 10); !errors.Is(err, delay.ErrRecordLost) {
				t.Fatalf("take after the record was deleted: %v, want ErrRecordLost", err)
			}
		}},
		{"due entry lost", "tierset_queue_restored_total", false, func(t *testing.T, q *delay.Queue, key func(string) string) {
			enqueue(t, q, delay.Job{Key: "a", Token: "t", When: future})
			del(t, key("due"))
			if e := enqueue(t, q, delay.Job{Key: "a", Token: "t", When: future}); !e.Restored {
				t.Fatalf("enqueue after the due set was deleted: %+v, want Restored", e)
			}
		}},
		{"ID counter lost", "tierset_queue_id_repairs_total", false, func(t *testing.T, q *delay.Queue, key func(string) string) {
			first := enqueue(t, q, delay.Job{Key: "a", When: future})
			del(t, key("ctr"))
			if e := enqueue(t, q, delay.Job{Key: "b", When: future}); e.ID == first.ID {
				t.Fatalf("enqueue after the counter was deleted reused ID %s", e.ID)
			}
		}},
		{"index lost", "tierset_queue_index_lost_total", false, func(t *testing.T, q *delay.Queue, key func(string) string) {
			enqueue(t, q, delay.Job{Key: "a", Token: "t", When: future})
			del(t, key("idx"))
			if e := enqueue(t, q, delay.Job{Key: "a", Token: "t", When: future}); !e.Duplicate {
				t.Fatalf("enqueue after the index was deleted: %+v, want Duplicate", e)
			}
		}},
	} {
		t.Run(row.name, func(t *testing.T) {
			name := "loss-" + strings.ReplaceAll(row.name, " ", "-")
			o := delay.Options{Prefix: b.Prefix}
			if row.codec {
				c, err := score.NewTimeCodec(time.Unix(0, 0), 0)
				if err != nil {
					t.Fatal(err)
				}
				o.Codec = c
			}
			q, err := delay.New(b.Client, name, o)
			if err != nil {
				t.Fatal(err)
			}
			reg := pedanticRegistry(tsprom.NewQueueCollector(tsprom.QueueOptions{}, q))
			_, before := scrape(t, reg)
			for s := range series(delay.Stats{}) {
				if v := sample(t, before, s+`{queue="`+name+`"}`); v != 0 {
					t.Errorf("%s = %g before any loss, want 0", s, v)
				}
			}
			row.provoke(t, q, func(suffix string) string { return b.Prefix + ":" + keyname.QueueTag(name) + ":" + suffix })
			st, err := q.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, after := scrape(t, reg)
			for s, n := range series(st) {
				want := int64(0)
				if s == row.moved {
					want = 1
				}
				got := sample(t, after, s+`{queue="`+name+`"}`)
				if got != float64(n) || n != want {
					t.Errorf("%s: scraped %g, Stats %d, want %d", s, got, n, want)
				}
			}
		})
	}
}
