package prometheus_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/cache"
	tsprom "github.com/tierset/tierset/contrib/prometheus"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/delaytest"
	"github.com/tierset/tierset/internal/keyname"
	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/score"
)

// scrape serves reg on a real /metrics endpoint and returns the body.
func scrape(t *testing.T, reg *prometheus.Registry) (url, body string) {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	t.Cleanup(srv.Close)
	res, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: status %d, %v\n%s", res.StatusCode, err, b)
	}
	return srv.URL + "/metrics", string(b)
}

func quantityPromo(id string, gifts bool) gradient.Promotion {
	pct := func(p int64) gradient.Reward {
		return gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(p)}
	}
	p := gradient.Promotion{ID: id, Metric: gradient.Quantity, Tiers: []gradient.Tier{
		{ID: "3+", Threshold: decimal.NewFromInt(3), Reward: pct(10)},
		{ID: "5+", Threshold: decimal.NewFromInt(5), Reward: pct(20)},
	}}
	if gifts {
		p.Tiers[1].Gifts = []gradient.Gift{{SKU: "tote", Qty: 1, Name: "Tote bag"}}
	}
	return p
}

func TestCacheCollectorScrape(t *testing.T) {
	b := testredis.Redis(t)
	ctx := t.Context()
	col := tsprom.NewCacheCollector(tsprom.CacheOptions{MaxPromotions: 2})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	c, err := cache.New(b.Client, cache.Options{Prefix: b.Prefix, Observer: col})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Refresh(ctx, quantityPromo("a", true), quantityPromo("b", false), quantityPromo("c", false)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Refresh(ctx, quantityPromo("a", true)); err != nil { // unchanged
		t.Fatal(err)
	}
	// Hits: a ×3, b ×2, c ×1 (c is past the cap of 2: "other").
	var qs []cache.Query
	for _, id := range []string{"a", "a", "a", "b", "b", "c"} {
		qs = append(qs, cache.QuantityQuery(id, 5))
	}
	qs = append(qs, cache.QuantityQuery("a", 1), cache.QuantityQuery("missing", 4)) // no_tier, not_found
	rs, err := c.MatchCart(ctx, qs, cache.MatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Gifts(ctx, rs[:1]); err != nil {
		t.Fatal(err)
	}
	if len(rs[0].Tier.Gifts) != 1 {
		t.Fatalf("gifts of a/5+: %+v", rs[0].Tier)
	}
	// A corrupt member: overwrite c's tiers with bytes that do not decode.
	if err := b.Client.ZAdd(ctx, b.Prefix+":{p:c}:tiers", redis.Z{Score: 4, Member: "\xff\xfe"}).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Match(ctx, cache.QuantityQuery("c", 4), cache.MatchOptions{}); !errors.Is(err, cache.ErrCorrupt) {
		t.Fatalf("match on a corrupt member: %v, want ErrCorrupt", err)
	}

	url, body := scrape(t, reg)
	want := `
# HELP tierset_cache_lookups_total Cart lines looked up, by outcome.
# TYPE tierset_cache_lookups_total counter
tierset_cache_lookups_total{outcome="damaged"} 0
tierset_cache_lookups_total{outcome="error"} 1
tierset_cache_lookups_total{outcome="hit"} 6
tierset_cache_lookups_total{outcome="no_tier"} 1
tierset_cache_lookups_total{outcome="not_active"} 0
tierset_cache_lookups_total{outcome="not_found"} 1
# HELP tierset_cache_promotion_hits_total Tier hits per promotion; promotions past the cap count under "other".
# TYPE tierset_cache_promotion_hits_total counter
tierset_cache_promotion_hits_total{promotion="a"} 3
tierset_cache_promotion_hits_total{promotion="b"} 2
tierset_cache_promotion_hits_total{promotion="other"} 1
# HELP tierset_cache_refreshes_total Promotions refreshed, by outcome.
# TYPE tierset_cache_refreshes_total counter
tierset_cache_refreshes_total{outcome="added"} 3
tierset_cache_refreshes_total{outcome="failed"} 0
tierset_cache_refreshes_total{outcome="repaired"} 0
tierset_cache_refreshes_total{outcome="unchanged"} 1
tierset_cache_refreshes_total{outcome="updated"} 0
# HELP tierset_cache_gift_fetches_total Calls that fetched gift lists from Redis: Cache.Gifts, or a Match or MatchCart with Gifts.
# TYPE tierset_cache_gift_fetches_total counter
tierset_cache_gift_fetches_total 1
# HELP tierset_cache_corrupt_reads_total Bytes read from Redis that failed to decode, by record.
# TYPE tierset_cache_corrupt_reads_total counter
tierset_cache_corrupt_reads_total{record="gifts"} 0
tierset_cache_corrupt_reads_total{record="member"} 1
tierset_cache_corrupt_reads_total{record="meta"} 0
`
	if err := testutil.ScrapeAndCompare(url, strings.NewReader(want),
		"tierset_cache_lookups_total", "tierset_cache_promotion_hits_total", "tierset_cache_refreshes_total",
		"tierset_cache_gift_fetches_total", "tierset_cache_corrupt_reads_total"); err != nil {
		t.Fatal(err)
	}
	// match round trips: the cart, the re-read of its line that found
	// nothing (not found or damaged), and the corrupt Match.
	for _, s := range []string{`tierset_cache_lookup_duration_seconds_count 9`, `tierset_cache_round_trips_total{op="match"} 3`,
		`tierset_cache_round_trips_total{op="gifts"} 1`} {
		if !strings.Contains(body, s) {
			t.Errorf("scrape lacks %q:\n%s", s, body)
		}
	}
}

func TestQueueAndDelayCollectorScrape(t *testing.T) {
	b := testredis.Redis(t)
	ctx := t.Context()
	dc := tsprom.NewDelayCollector(tsprom.DelayOptions{})
	q, err := delay.New(b.Client, "orders", delay.Options{Prefix: b.Prefix, Observer: dc, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	qc := tsprom.NewQueueCollector(tsprom.QueueOptions{}, q)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(dc, qc)

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
	batch, err := q.Take(ctx, 10)
	if err != nil || len(batch.Tasks) != 6 {
		t.Fatalf("take: %d tasks, %v", len(batch.Tasks), err)
	}
	for _, tk := range batch.Tasks[:3] { // 3 acked
		if err := q.Ack(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Retry(ctx, batch.Tasks[3], errors.New("boom")); err != nil { // MaxAttempts 1: dead
		t.Fatal(err)
	}
	if _, err := q.Kill(ctx, batch.Tasks[4], errors.New("bad")); err != nil { // dead
		t.Fatal(err)
	}
	// batch.Tasks[5] stays in flight.
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
# HELP tierset_queue_up 1 when this scrape read the queue's Stats, 0 when the read failed.
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
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(qc)
	url, _ := scrape(t, reg)
	want := `
# HELP tierset_queue_up 1 when this scrape read the queue's Stats, 0 when the read failed.
# TYPE tierset_queue_up gauge
tierset_queue_up{queue="x"} 0
`
	if err := testutil.ScrapeAndCompare(url, strings.NewReader(want), "tierset_queue_up", "tierset_queue_tasks"); err != nil {
		t.Fatal(err)
	}
}

// sample returns the value of one series in a scraped body; a series
// missing from the scrape fails the test.
func sample(t *testing.T, body, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("scrape lacks %s", series)
	return 0
}

// TestCacheCollectorZeroSeries: before any event, every outcome and
// event label value is already scraped, at 0.
func TestCacheCollectorZeroSeries(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(tsprom.NewCacheCollector(tsprom.CacheOptions{}))
	_, body := scrape(t, reg)
	for _, s := range []string{
		`tierset_cache_lookups_total{outcome="damaged"}`, `tierset_cache_lookups_total{outcome="hit"}`,
		`tierset_cache_refreshes_total{outcome="repaired"}`, `tierset_cache_corrupt_reads_total{record="meta"}`,
		`tierset_cache_near_events_total{event="hit"}`, `tierset_cache_near_events_total{event="miss"}`,
		`tierset_cache_near_events_total{event="install"}`, `tierset_cache_near_events_total{event="invalidate"}`,
		`tierset_cache_near_events_total{event="evict"}`, `tierset_cache_near_events_total{event="drop_all"}`,
		`tierset_cache_load_duration_seconds_count{outcome="loaded"}`, `tierset_cache_load_duration_seconds_count{outcome="unknown"}`,
		`tierset_cache_load_duration_seconds_count{outcome="remembered"}`, `tierset_cache_load_duration_seconds_count{outcome="shared"}`,
		`tierset_cache_load_duration_seconds_count{outcome="failed"}`, `tierset_cache_refresh_duration_seconds_count`,
		`tierset_cache_round_trips_total{op="gifts"}`, `tierset_cache_warnings_total`,
	} {
		if v := sample(t, body, s); v != 0 {
			t.Errorf("%s = %g before any event, want 0", s, v)
		}
	}
}

// TestCacheCollectorNearLoaderRefresh: real traffic through a near cache
// with a Loader moves the near, load, refresh-duration and gift series
// by exactly what it did.
func TestCacheCollectorNearLoaderRefresh(t *testing.T) {
	b := testredis.Redis(t)
	ctx := t.Context()
	writer, err := cache.New(b.Client, cache.Options{Prefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Refresh(ctx, quantityPromo("a", false), quantityPromo("b", true)); err != nil {
		t.Fatal(err)
	}
	col := tsprom.NewCacheCollector(tsprom.CacheOptions{})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	// Its own client: the near cache's tracking connection and reads are
	// apart from the writer's.
	opt := *b.Client.(*redis.Client).Options()
	rdb := redis.NewClient(&opt)
	t.Cleanup(func() { _ = rdb.Close() })
	ld := cache.LoaderFunc(func(_ context.Context, id string) (*gradient.Promotion, error) {
		if id == "cold" {
			p := quantityPromo("cold", false)
			return &p, nil
		}
		return nil, cache.ErrUnknownPromotion
	})
	c, err := cache.New(rdb, cache.Options{Prefix: b.Prefix, Observer: col, NearCache: &cache.NearCacheOptions{}, Loader: ld})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for !c.NearStats().Tracking { // the first near read starts tracking
		if time.Now().After(deadline) {
			t.Fatal("near cache tracking not established in 10 s")
		}
		if _, err := c.Match(ctx, cache.QuantityQuery("a", 1), cache.MatchOptions{}); !errors.Is(err, cache.ErrNoTier) {
			t.Fatalf("probe: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	_, before := scrape(t, reg)
	delta := func(body, series string) float64 { return sample(t, body, series) - sample(t, before, series) }

	// b twice with its gifts: a miss that installs and fetches the gift
	// list, then a hit answered from the ladder and its held gifts.
	for range 2 {
		r, err := c.Match(ctx, cache.QuantityQuery("b", 5), cache.MatchOptions{Gifts: true})
		if err != nil || r.Tier == nil || len(r.Tier.Gifts) != 1 {
			t.Fatalf("match b: %+v %v", r.Tier, err)
		}
	}
	// Another client changes b: the tracking invalidation drops the ladder.
	if _, err := writer.Refresh(ctx, quantityPromo("b", false)); err != nil {
		t.Fatal(err)
	}
	inv := `tierset_cache_near_events_total{event="invalidate"}`
	for {
		_, body := scrape(t, reg)
		if delta(body, inv) >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no near invalidation 10 s after a Refresh elsewhere")
		}
		time.Sleep(time.Millisecond)
	}
	// A cold promotion the Loader knows (one near miss before the load,
	// one for the re-read after it) and one it does not (one miss).
	if _, err := c.Match(ctx, cache.QuantityQuery("cold", 3), cache.MatchOptions{}); err != nil {
		t.Fatalf("match cold: %v", err)
	}
	if _, err := c.Match(ctx, cache.QuantityQuery("nope", 3), cache.MatchOptions{}); !errors.Is(err, cache.ErrUnknownPromotion) {
		t.Fatalf("match nope: %v, want ErrUnknownPromotion", err)
	}
	if _, err := c.Refresh(ctx, quantityPromo("r", false)); err != nil {
		t.Fatal(err)
	}

	_, after := scrape(t, reg)
	for _, w := range []struct {
		series string
		want   float64
	}{
		{`tierset_cache_near_events_total{event="hit"}`, 1},
		{`tierset_cache_near_events_total{event="miss"}`, 4},
		{`tierset_cache_load_duration_seconds_count{outcome="loaded"}`, 1},
		{`tierset_cache_load_duration_seconds_count{outcome="unknown"}`, 1},
		{`tierset_cache_load_duration_seconds_count{outcome="failed"}`, 0},
		{`tierset_cache_refresh_duration_seconds_count`, 2}, // the Loader's and the explicit one
		{`tierset_cache_gift_fetches_total`, 1},
		{`tierset_cache_round_trips_total{op="gifts"}`, 1},
	} {
		if got := delta(after, w.series); got != w.want {
			t.Errorf("%s moved by %g, want %g", w.series, got, w.want)
		}
	}
	// Installs: b, and cold unless an invalidation of its own Refresh
	// landed between that re-read and its install; invalidations: b, and
	// cold if it did land after.
	if got := delta(after, `tierset_cache_near_events_total{event="install"}`); got < 1 || got > 2 {
		t.Errorf("installs moved by %g, want 1 or 2", got)
	}
	if got := delta(after, inv); got < 1 || got > 2 {
		t.Errorf("invalidations moved by %g, want 1 or 2", got)
	}
	if got := delta(after, `tierset_cache_refresh_duration_seconds_sum`); got <= 0 {
		t.Errorf("refresh duration sum moved by %g, want > 0", got)
	}
}

// TestDelayCollectorLossAndWarning: a task record lost in Redis, met by a
// Take, counts under record_lost; a client without ContextTimeoutEnabled,
// accepted with AllowNoContextTimeout, counts as a warning.
func TestDelayCollectorLossAndWarning(t *testing.T) {
	b := testredis.Redis(t)
	ctx := t.Context()
	dc := tsprom.NewDelayCollector(tsprom.DelayOptions{})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(dc)
	q, err := delay.New(b.Client, "lossy", delay.Options{Prefix: b.Prefix, Observer: dc})
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
	if _, err := q.Take(ctx, 10); !errors.Is(err, delay.ErrRecordLost) {
		t.Fatalf("take after the record was deleted: %v, want ErrRecordLost", err)
	}
	opt := *b.Client.(*redis.Client).Options()
	opt.ContextTimeoutEnabled = false
	loose := redis.NewClient(&opt)
	t.Cleanup(func() { _ = loose.Close() })
	if _, err := delay.New(loose, "loose", delay.Options{Prefix: b.Prefix, Observer: dc, AllowNoContextTimeout: true}); err != nil {
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

// TestQueueCollectorRetriesExpired: two Retry calls and one lease that
// expires and is swept back show in retries_total and expired_total as
// Stats counts them, and in this process's retries and sweep counters.
func TestQueueCollectorRetriesExpired(t *testing.T) {
	b := testredis.Redis(t)
	ctx := t.Context()
	dc := tsprom.NewDelayCollector(tsprom.DelayOptions{})
	q, err := delay.New(b.Client, "retry-exp", delay.Options{Prefix: b.Prefix, Observer: dc})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(dc, tsprom.NewQueueCollector(tsprom.QueueOptions{}, q))

	past := time.Now().Add(-time.Second)
	for i := range 3 {
		if _, err := q.Enqueue(ctx, delay.Job{Key: fmt.Sprintf("k%d", i), When: delay.At(past)}); err != nil {
			t.Fatal(err)
		}
	}
	batch, err := q.Take(ctx, 3)
	if err != nil || len(batch.Tasks) != 3 {
		t.Fatalf("take: %d tasks, %v", len(batch.Tasks), err)
	}
	for _, tk := range batch.Tasks[:2] {
		if out, err := q.Retry(ctx, tk, errors.New("boom")); err != nil || out != delay.Retried {
			t.Fatalf("retry %s: %v %v, want Retried", tk.ID, out, err)
		}
	}
	// The third lease is cut to 1 ms (the queue's own Lease is 30 s) so it
	// expires now; the sweep is polled until it has returned it.
	if _, err := q.Extend(ctx, batch.Tasks[2], time.Millisecond); err != nil {
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
			"tierset_queue_restored_total": s.Restored, "tierset_queue_counter_lost_total": s.CounterLost,
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
			if _, err := q.Take(ctx, 10); !errors.Is(err, delay.ErrRecordLost) {
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
		{"ID counter lost", "tierset_queue_counter_lost_total", false, func(t *testing.T, q *delay.Queue, key func(string) string) {
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
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(tsprom.NewQueueCollector(tsprom.QueueOptions{}, q))
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

// TestCacheCollectorDamaged: a promotion whose tiers key is deleted
// behind the cache's back (its meta hash left) reads as ErrDamaged, and
// each damaged line counts once under lookups_total{outcome="damaged"};
// the Refresh that heals it counts as repaired.
func TestCacheCollectorDamaged(t *testing.T) {
	b := testredis.Redis(t)
	ctx := t.Context()
	col := tsprom.NewCacheCollector(tsprom.CacheOptions{})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	c, err := cache.New(b.Client, cache.Options{Prefix: b.Prefix, Observer: col})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Refresh(ctx, quantityPromo("d", false), quantityPromo("h", false)); err != nil {
		t.Fatal(err)
	}
	// The key layout of cache/keys.go: <prefix>:{p:<id>}:tiers.
	if n, err := b.Client.Del(ctx, b.Prefix+":{p:d}:tiers").Result(); err != nil || n != 1 {
		t.Fatalf("DEL d's tiers key: %d removed, %v", n, err)
	}
	if _, err := c.Match(ctx, cache.QuantityQuery("d", 5), cache.MatchOptions{}); !errors.Is(err, cache.ErrDamaged) {
		t.Fatalf("match on d: %v, want ErrDamaged", err)
	}
	rs, err := c.MatchCart(ctx, []cache.Query{cache.QuantityQuery("d", 3), cache.QuantityQuery("h", 5),
		cache.QuantityQuery("d", 1)}, cache.MatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, wantErr := range []error{cache.ErrDamaged, nil, cache.ErrDamaged} {
		if !errors.Is(rs[i].Err, wantErr) {
			t.Fatalf("cart line %d: %v, want %v", i, rs[i].Err, wantErr)
		}
	}
	if rep, err := c.Refresh(ctx, quantityPromo("d", false)); err != nil || rep.Repaired != 1 {
		t.Fatalf("healing refresh: %+v %v, want one repaired", rep, err)
	}

	url, _ := scrape(t, reg)
	want := `
# HELP tierset_cache_lookups_total Cart lines looked up, by outcome.
# TYPE tierset_cache_lookups_total counter
tierset_cache_lookups_total{outcome="damaged"} 3
tierset_cache_lookups_total{outcome="error"} 0
tierset_cache_lookups_total{outcome="hit"} 1
tierset_cache_lookups_total{outcome="no_tier"} 0
tierset_cache_lookups_total{outcome="not_active"} 0
tierset_cache_lookups_total{outcome="not_found"} 0
# HELP tierset_cache_refreshes_total Promotions refreshed, by outcome.
# TYPE tierset_cache_refreshes_total counter
tierset_cache_refreshes_total{outcome="added"} 2
tierset_cache_refreshes_total{outcome="failed"} 0
tierset_cache_refreshes_total{outcome="repaired"} 1
tierset_cache_refreshes_total{outcome="unchanged"} 0
tierset_cache_refreshes_total{outcome="updated"} 0
`
	if err := testutil.ScrapeAndCompare(url, strings.NewReader(want), "tierset_cache_lookups_total",
		"tierset_cache_refreshes_total"); err != nil {
		t.Fatal(err)
	}
}

// TestDelayCollectorHandleSeconds: every handler call of a worker shows
// in handle_seconds under its result.
func TestDelayCollectorHandleSeconds(t *testing.T) {
	b := testredis.Redis(t)
	ctx := t.Context()
	dc := tsprom.NewDelayCollector(tsprom.DelayOptions{})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(dc)
	q, err := delay.New(b.Client, "handled", delay.Options{Prefix: b.Prefix, Observer: dc})
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
	}, delay.WorkerOptions{Heartbeat: -1})
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
