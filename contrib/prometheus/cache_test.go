package prometheus_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/cache"
	tsprom "github.com/tierset/tierset/contrib/prometheus"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

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
	reg := pedanticRegistry(col)
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

// TestCacheCollectorZeroSeries: before any event, every outcome and
// event label value is already scraped, at 0.
func TestCacheCollectorZeroSeries(t *testing.T) {
	reg := pedanticRegistry(tsprom.NewCacheCollector(tsprom.CacheOptions{}))
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
	reg := pedanticRegistry(col)
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
	// Another client changes b: the tracking invalidation marks the ladder
	// stale and its background re-read installs the new version.
	if _, err := writer.Refresh(ctx, quantityPromo("b", false)); err != nil {
		t.Fatal(err)
	}
	inv := `tierset_cache_near_events_total{event="invalidate"}`
	inst := `tierset_cache_near_events_total{event="install"}`
	for {
		_, body := scrape(t, reg)
		if delta(body, inv) >= 1 && delta(body, inst) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no near invalidation and re-read 10 s after a Refresh elsewhere")
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
	// Installs: b and its re-read, and cold unless an invalidation of its
	// own Refresh landed between that read and its install; invalidations:
	// b, and cold if it did land after (its re-read then finds the content
	// unchanged and installs nothing).
	if got := delta(after, inst); got < 2 || got > 3 {
		t.Errorf("installs moved by %g, want 2 or 3", got)
	}
	if got := delta(after, inv); got < 1 || got > 2 {
		t.Errorf("invalidations moved by %g, want 1 or 2", got)
	}
	if got := delta(after, `tierset_cache_refresh_duration_seconds_sum`); got <= 0 {
		t.Errorf("refresh duration sum moved by %g, want > 0", got)
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
	reg := pedanticRegistry(col)
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
