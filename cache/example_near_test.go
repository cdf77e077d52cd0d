package cache_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/exampleredis"
)

// A near cache is opt-in. Once tracking is established (Redis client
// tracking, which real Redis has), a promotion's whole ladder is held in
// process after its first read and every value is answered from memory.
// Until then, and here on miniredis, which has no CLIENT TRACKING, every
// read goes to Redis: the answers are the same either way.
func ExampleOptions_nearCache() {
	rdb, mr := exampleredis.Start() // a program: redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer exampleredis.Stop(rdb, mr)
	ctx := context.Background()

	c, err := cache.New(rdb, cache.Options{NearCache: &cache.NearCacheOptions{
		MaxPromotions: 1000,    // ladders held, LRU beyond
		MaxBytes:      8 << 20, // accounted bytes, LRU beyond
	}})
	if err != nil {
		panic(err)
	}
	defer c.Close() // stops tracking; the Redis client stays open

	pct := func(p int64) gradient.Reward {
		return gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(p)}
	}
	if _, err := c.Refresh(ctx, gradient.Promotion{ID: "sale", Metric: gradient.Quantity, Tiers: []gradient.Tier{
		{ID: "3+", Threshold: decimal.NewFromInt(3), Reward: pct(10)},
		{ID: "5+", Threshold: decimal.NewFromInt(5), Reward: pct(20)},
	}}); err != nil {
		panic(err)
	}
	for _, n := range []int64{1, 4, 9} {
		r, err := c.Match(ctx, cache.QuantityQuery("sale", n), cache.MatchOptions{Next: true})
		switch {
		case err == nil && r.Next != nil:
			fmt.Printf("%d items: %s, %s more reaches %s\n", n, r.Tier.ID, r.Shortfall, r.Next.ID)
		case err == nil:
			fmt.Printf("%d items: %s, the top tier\n", n, r.Tier.ID)
		default:
			fmt.Printf("%d items: %v; %s more reaches %s\n", n, err, r.Shortfall, r.Next.ID)
		}
	}
	// Output:
	// 1 items: cache: no tier reached: gradient: no tier reached; 2 more reaches 3+
	// 4 items: 3+, 1 more reaches 5+
	// 9 items: 5+, the top tier
}

// A Loader fills Redis from the source of truth when a read finds a
// promotion missing: one Load per promotion however many carts ask at
// once, written through Refresh. An ID the source does not know is
// remembered, so asking again costs no Load.
func ExampleLoader() {
	rdb, mr := exampleredis.Start() // a program: redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer exampleredis.Stop(rdb, mr)
	ctx := context.Background()

	source := map[string]gradient.Promotion{
		"spring": {ID: "spring", Metric: gradient.Quantity, Tiers: []gradient.Tier{{ID: "2+",
			Threshold: decimal.NewFromInt(2), Reward: gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(15)}}}},
	}
	// Load runs concurrently for the distinct IDs of one cart.
	var loads atomic.Int64
	loader := cache.LoaderFunc(func(ctx context.Context, id string) (*gradient.Promotion, error) {
		loads.Add(1)
		p, ok := source[id]
		if !ok {
			return nil, cache.ErrUnknownPromotion
		}
		return &p, nil
	})
	c, err := cache.New(rdb, cache.Options{Loader: loader})
	if err != nil {
		panic(err)
	}

	// Redis is cold: the first cart loads "spring" and is answered.
	rs, err := c.MatchCart(ctx, []cache.Query{cache.QuantityQuery("spring", 3), cache.QuantityQuery("nope", 1)}, cache.MatchOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println("spring:", rs[0].Tier.ID, rs[0].Tier.Reward.Percent.String()+"% off")
	fmt.Println("nope unknown:", errors.Is(rs[1].Err, cache.ErrUnknownPromotion), "not found:", errors.Is(rs[1].Err, cache.ErrNotFound))
	for i := 0; i < 100; i++ {
		_, _ = c.MatchCart(ctx, []cache.Query{cache.QuantityQuery("spring", 3), cache.QuantityQuery("nope", 1)}, cache.MatchOptions{})
	}
	fmt.Println("loads after 101 carts:", loads.Load())
	// Output:
	// spring: 2+ 15% off
	// nope unknown: true not found: true
	// loads after 101 carts: 2
}

// A service pricing many carts keeps one result slice and appends each
// cart's results into it, as strconv.AppendInt does: with a near cache, a
// cart answered from memory then allocates nothing. The results are
// overwritten by the next cart, so use them (or copy them) before.
func ExampleCache_AppendMatchCart() {
	rdb, mr := exampleredis.Start() // a program: redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer exampleredis.Stop(rdb, mr)
	ctx := context.Background()

	c, err := cache.New(rdb, cache.Options{NearCache: &cache.NearCacheOptions{}})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	if _, err := c.Refresh(ctx, gradient.Promotion{ID: "bulk", Metric: gradient.Quantity, Tiers: []gradient.Tier{
		{ID: "6+", Threshold: decimal.NewFromInt(6), Reward: gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(5)}},
	}}); err != nil {
		panic(err)
	}
	carts := [][]cache.Query{
		{cache.QuantityQuery("bulk", 6), cache.QuantityQuery("bulk", 2)},
		{cache.QuantityQuery("bulk", 12)},
	}
	var buf []cache.Result // one per worker, reused for every cart
	for i, cart := range carts {
		buf, err = c.AppendMatchCart(ctx, buf[:0], cart, cache.MatchOptions{})
		if err != nil {
			panic(err) // buf is as it was: a bad batch, or Redis unreachable
		}
		for _, r := range buf {
			if r.Err != nil {
				fmt.Printf("cart %d: %s: %v\n", i, r.Promotion, r.Err)
				continue
			}
			fmt.Printf("cart %d: %s: tier %s\n", i, r.Promotion, r.Tier.ID)
		}
	}
	// Output:
	// cart 0: bulk: tier 6+
	// cart 0: bulk: cache: no tier reached: gradient: no tier reached
	// cart 1: bulk: tier 6+
}
