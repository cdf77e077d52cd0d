package tierset_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/gradient"
)

// A promotion's tiers warmed into Redis and a cart matched against them,
// then a delay queue's task: README.md shows this file from its imports
// on, and TestReadmeExample fails when the two differ.
func Example() {
	mr, err := miniredis.Run() // an embedded Redis; give your server's address instead
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	ctx := context.Background()

	// Buy 3, get 10% off; buy 5, get 20% off.
	c, err := cache.New(rdb, cache.Options{})
	if err != nil {
		panic(err)
	}
	pct := func(p int64) gradient.Reward {
		return gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(p)}
	}
	_, err = c.Refresh(ctx, gradient.Promotion{ID: "buy-more", Metric: gradient.Quantity, Tiers: []gradient.Tier{
		{ID: "3+", Threshold: decimal.NewFromInt(3), Reward: pct(10)},
		{ID: "5+", Threshold: decimal.NewFromInt(5), Reward: pct(20)},
	}})
	if err != nil {
		panic(err)
	}
	results, err := c.MatchCart(ctx, []cache.Query{
		cache.QuantityQuery("buy-more", 4), // a line of 4 items
	}, cache.MatchOptions{Next: true}) // one round trip for the whole cart
	if err != nil {
		panic(err)
	}
	for _, r := range results {
		fmt.Printf("%s: tier %s, %s%% off; %s more reaches %s\n",
			r.Promotion, r.Tier.ID, r.Tier.Reward.Percent, r.Shortfall, r.Next.ID)
	}

	// Cancel the unpaid order after 30 minutes, unless it is paid first.
	q, err := delay.New(rdb, "orders", delay.Options{})
	if err != nil {
		panic(err)
	}
	e, err := q.Enqueue(ctx, delay.Job{Key: "order:42", Token: "cancel", When: delay.After(30 * time.Minute)})
	if err != nil {
		panic(err)
	}
	fmt.Println("enqueued:", e.State)
	paid, err := q.Cancel(ctx, delay.Selector{Key: "order:42"})
	if err != nil {
		panic(err)
	}
	fmt.Println("paid, tasks cancelled:", paid.Found)
	// Output:
	// buy-more: tier 3+, 10% off; 1 more reaches 5+
	// enqueued: pending
	// paid, tasks cancelled: 1
}
