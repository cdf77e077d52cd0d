package warm_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/internal/exampleredis"
	"github.com/tierset/tierset/rules"
	"github.com/tierset/tierset/warm"
)

func ExampleWarm() {
	client, m := exampleredis.Start() // a program: redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer exampleredis.Stop(client, m)
	c, err := cache.New(client, cache.Options{})
	if err != nil {
		panic(err)
	}
	promos, err := rules.Parse(strings.NewReader(`{"version": 1, "promotions": [
	  {"id": "10086", "metric": "amount", "minor_digits": 2,
	   "tiers": [{"id": "t1", "threshold": "99.99", "reward": {"kind": "amount_off", "amount": "10"}}]}]}`),
		"rules.json", rules.Options{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for run := 1; run <= 2; run++ {
		s, err := warm.Warm(ctx, c, promos, warm.Options{})
		if err != nil {
			panic(err)
		}
		fmt.Printf("run %d: added %v, unchanged %v\n", run, s.Added, s.Unchanged)
	}
	// Output:
	// run 1: added [10086], unchanged []
	// run 2: added [], unchanged [10086]
}
