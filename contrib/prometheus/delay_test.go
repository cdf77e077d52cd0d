package prometheus_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	tsprom "github.com/tierset/tierset/contrib/prometheus"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delayraw"
	"github.com/tierset/tierset/internal/delaytest"
	"github.com/tierset/tierset/internal/keyname"
	"github.com/tierset/tierset/internal/testredis"
)

// TestDelayCollectorLossAndWarning: a task record lost in Redis, met by a
// Take, counts under record_lost; a client without ContextTimeoutEnabled,
// accepted with AllowNoContextTimeout, counts as a warning.
func TestDelayCollectorLossAndWarning(t *testing.T) {
	b := testredis.Redis(t)
	ctx := t.Context()
	dc := tsprom.NewDelayCollector(tsprom.DelayOptions{})
	reg := pedanticRegistry(dc)
	q, err := delay.New(b.Client, "lossy", delay.Options{Prefix: b.Prefix, Observer: dc.Observer()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(ctx, delay.Job{Key: "k", When: delay.At(time.Now().Add(-time.Second))}); err != nil {
		t.Fatal(err)
	}
	buckets, err := b.Client.Keys(ctx, b.Prefix+":"+keyname.QueueTag("lossy")+":tasks:*").Result()
	if err != nil || len(buckets) == 0 {
		t.Fatalf("record buckets: %v %v", buckets, err)
	}
	if err := b.Client.Del(ctx, buckets...).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := delayraw.Take(ctx, q, 10); !errors.Is(err, delay.ErrRecordLost) {
		t.Fatalf("take after the record was deleted: %v, want ErrRecordLost", err)
	}
	opt := *b.Client.(*redis.Client).Options()
	opt.ContextTimeoutEnabled = false
	loose := redis.NewClient(&opt)
	t.Cleanup(func() { _ = loose.Close() })
	if _, err := delay.New(loose, "loose", delay.Options{Prefix: b.Prefix, Observer: dc.Observer(), AllowNoContextTimeout: true}); err != nil {
		t.Fatal(err)
	}
	url, _ := scrape(t, reg)
	want := `
# HELP tierset_delay_losses_total State Redis lost that this process met, by kind: tasks for record_lost and due_lost, one per repair for counter_lost and index_lost.
# TYPE tierset_delay_losses_total counter
tierset_delay_losses_total{kind="counter_lost",queue="loose"} 0
tierset_delay_losses_total{kind="counter_lost",queue="lossy"} 0
tierset_delay_losses_total{kind="due_lost",queue="loose"} 0
tierset_delay_losses_total{kind="due_lost",queue="lossy"} 0
tierset_delay_losses_total{kind="index_lost",queue="loose"} 0
tierset_delay_losses_total{kind="index_lost",queue="lossy"} 0
tierset_delay_losses_total{kind="other",queue="loose"} 0
tierset_delay_losses_total{kind="other",queue="lossy"} 0
tierset_delay_losses_total{kind="record_lost",queue="loose"} 0
tierset_delay_losses_total{kind="record_lost",queue="lossy"} 1
# HELP tierset_delay_warnings_total Server or client settings that put the queue at risk, by kind.
# TYPE tierset_delay_warnings_total counter
tierset_delay_warnings_total{kind="config_unavailable",queue="loose"} 0
tierset_delay_warnings_total{kind="config_unavailable",queue="lossy"} 0
tierset_delay_warnings_total{kind="eviction_policy",queue="loose"} 0
tierset_delay_warnings_total{kind="eviction_policy",queue="lossy"} 0
tierset_delay_warnings_total{kind="high_water",queue="loose"} 0
tierset_delay_warnings_total{kind="high_water",queue="lossy"} 0
tierset_delay_warnings_total{kind="other",queue="loose"} 1
tierset_delay_warnings_total{kind="other",queue="lossy"} 0
`
	if err := testutil.ScrapeAndCompare(url, strings.NewReader(want), "tierset_delay_losses_total", "tierset_delay_warnings_total"); err != nil {
		t.Fatal(err)
	}
}

// TestDelayCollectorHandleSeconds: every handler call of a worker shows
// in handle_seconds under its result.
func TestDelayCollectorHandleSeconds(t *testing.T) {
	b := testredis.Redis(t)
	ctx := t.Context()
	dc := tsprom.NewDelayCollector(tsprom.DelayOptions{})
	reg := pedanticRegistry(dc)
	q, err := delay.New(b.Client, "handled", delay.Options{Prefix: b.Prefix, Observer: dc.Observer()})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"ok1", "ok2", "bad"} {
		if _, err := q.Enqueue(ctx, delay.Job{Key: k}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	seen := 0
	_, stop := delaytest.StartWorker(t, ctx, q, func(ctx context.Context, tk *delay.Task) error {
		mu.Lock()
		seen++
		mu.Unlock()
		if tk.Key == "bad" {
			return delay.Permanent(errors.New("no"))
		}
		return nil
	}, delay.PoolOptions{Heartbeat: -1})
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := seen
		mu.Unlock()
		// Every result's series exists from the queue's first event, so
		// wait for the counts, not for the series.
		_, body := scrape(t, reg)
		if n == 3 && strings.Contains(body, `tierset_delay_handle_seconds_count{queue="handled",result="ok"} 2`) &&
			strings.Contains(body, `tierset_delay_handle_seconds_count{queue="handled",result="skip_retry"} 1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("handled %d of 3; handle_seconds counts not both reached", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = stop() // the worker ends before the final scrape
	_, body := scrape(t, reg)
	for _, want := range []string{
		`tierset_delay_handle_seconds_count{queue="handled",result="ok"} 2`,
		`tierset_delay_handle_seconds_count{queue="handled",result="skip_retry"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in\n%s", want, body)
		}
	}
}
