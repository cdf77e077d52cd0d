package cache_test

import (
	"context"
	"expvar"
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/exampleredis"
)

// Warm up two promotions, then match a three-line cart in one round trip.
func Example() {
	rdb, mr := exampleredis.Start() // a program: redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer exampleredis.Stop(rdb, mr)
	ctx := context.Background()

	c, err := cache.New(rdb, cache.Options{Prefix: "shop"})
	if err != nil {
		panic(err)
	}
	pct := func(p int64) gradient.Reward {
		return gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(p)}
	}
	buyMore := gradient.Promotion{ID: "buy-more", Metric: gradient.Quantity, Tiers: []gradient.Tier{
		{ID: "3+", Threshold: decimal.NewFromInt(3), Reward: pct(10)},
		{ID: "5+", Threshold: decimal.NewFromInt(5), Reward: pct(20),
			Gifts: []gradient.Gift{{SKU: "tote-bag", Qty: 1, Name: "Tote bag"}}},
		{ID: "10+", Threshold: decimal.NewFromInt(10), Reward: pct(30)},
	}}
	spend := gradient.Promotion{ID: "spend", Metric: gradient.Amount, MinorDigits: 2, Tiers: []gradient.Tier{
		{ID: "99.99", Threshold: decimal.RequireFromString("99.99"),
			Reward: gradient.Reward{Kind: gradient.AmountOff, Amount: decimal.NewFromInt(10)}},
	}}
	rep, err := c.Refresh(ctx, buyMore, spend)
	if err != nil {
		panic(err)
	}
	fmt.Println("added:", rep.Added)

	cart := []cache.Query{
		cache.QuantityQuery("buy-more", 7),
		cache.AmountQuery("spend", decimal.RequireFromString("99.98")),
		cache.QuantityQuery("gone", 1),
	}
	results, err := c.MatchCart(ctx, cart, cache.MatchOptions{Next: true, Gifts: true})
	if err != nil {
		panic(err)
	}
	for _, r := range results {
		switch {
		case r.Err == nil:
			fmt.Printf("%s: tier %s, %s%% off, gifts %v, next %s in %s\n", r.Promotion, r.Tier.ID,
				r.Tier.Reward.Percent, r.Tier.Gifts, r.Next.ID, r.Shortfall)
		case r.Next != nil:
			fmt.Printf("%s: %v; %s more reaches %s\n", r.Promotion, r.Err, r.Shortfall, r.Next.ID)
		default:
			fmt.Printf("%s: %v\n", r.Promotion, r.Err)
		}
	}

	rep, _ = c.Refresh(ctx, buyMore, spend)
	fmt.Println("second warm-up unchanged:", rep.Unchanged)
	// Output:
	// added: 2
	// buy-more: tier 5+, 20% off, gifts [{tote-bag 1 Tote bag}], next 10+ in 3
	// spend: cache: no tier reached: gradient: no tier reached; 0.01 more reaches 99.99
	// gone: cache: promotion not found
	// second warm-up unchanged: 2
}

// A promotion warmed before its sale starts answers ErrNotActive until
// the caller's clock reaches Start.
func ExampleOptions_now() {
	rdb, mr := exampleredis.Start() // a program: redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer exampleredis.Stop(rdb, mr)
	ctx := context.Background()

	start := time.Date(2030, 11, 11, 0, 0, 0, 0, time.UTC)
	now := start.Add(-time.Hour)
	c, _ := cache.New(rdb, cache.Options{Now: func() time.Time { return now }})
	_, err := c.Refresh(ctx, gradient.Promotion{ID: "1111", Metric: gradient.Quantity, Start: start,
		Tiers: []gradient.Tier{{ID: "2+", Threshold: decimal.NewFromInt(2),
			Reward: gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(50)}}}})
	if err != nil {
		panic(err)
	}
	_, err = c.Match(ctx, cache.QuantityQuery("1111", 2), cache.MatchOptions{})
	fmt.Println("an hour early:", err)
	now = start
	r, err := c.Match(ctx, cache.QuantityQuery("1111", 2), cache.MatchOptions{})
	fmt.Println("at start:", r.Tier.ID, err)
	// Output:
	// an hour early: cache: promotion not active
	// at start: 2+ <nil>
}

// expvarObserver publishes lookups by outcome and round trips with the
// standard library's expvar; a Prometheus or OpenTelemetry observer has
// the same shape.
type expvarObserver struct {
	cache.NopObserver
	lookups    *expvar.Map
	roundTrips *expvar.Int
}

func (o expvarObserver) OnLookup(_ string, out cache.Outcome, _ time.Duration) {
	o.lookups.Add(out.String(), 1)
}
func (o expvarObserver) OnRoundTrips(_ cache.Op, n int) { o.roundTrips.Add(int64(n)) }

func ExampleObserver() {
	rdb, mr := exampleredis.Start() // a program: redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer exampleredis.Stop(rdb, mr)
	ctx := context.Background()

	obs := expvarObserver{lookups: new(expvar.Map).Init(), roundTrips: new(expvar.Int)}
	c, _ := cache.New(rdb, cache.Options{Observer: obs})
	_, _ = c.Refresh(ctx, gradient.Promotion{ID: "p", Metric: gradient.Quantity, Tiers: []gradient.Tier{{ID: "3+",
		Threshold: decimal.NewFromInt(3), Reward: gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(10)}}}})
	_, _ = c.MatchCart(ctx, []cache.Query{cache.QuantityQuery("p", 4), cache.QuantityQuery("p", 1), cache.QuantityQuery("q", 1)}, cache.MatchOptions{})
	fmt.Println(obs.lookups.String())
	// Refresh: WATCH, probe, EXEC. Cart: one pipeline, and one more
	// because "q" found nothing (it is read again with its meta key, to
	// tell not found from damaged).
	fmt.Println("round trips:", obs.roundTrips.Value())
	// Output:
	// {"hit": 1, "no_tier": 1, "not_found": 1}
	// round trips: 5
}
