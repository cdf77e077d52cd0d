package warm_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/soak"
	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/warm"
)

// TestWarmStrayKeys measures List and a pruning Warm (the path a
// watcher's resync takes: FromSource with Prune) on an indexed prefix,
// side by side on an empty private server and on one holding stray keys
// (DEBUG POPULATE), and prints the ratios (10M strays, 10,000 promotions);
// it asserts the indexed List is at least 20x faster than the SCAN List. The SCAN List of an unindexed
// prefix is measured on the stray server for comparison.
func TestWarmStrayKeys(t *testing.T) {
	soak.Require(t, "fills a private server with 10M keys; TestIndexListNoScan in cache is the fast check")
	// Beside TestFaultOrderedSchedule: its own servers, and a ratio of two
	// measurements interleaved on them.
	t.Parallel()
	strays, n := 10_000_000, 10_000
	// Filling 10M keys outlasts testredis.Ctx's two minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	t.Cleanup(cancel)
	ps := make([]gradient.Promotion, n)
	for i := range ps {
		ps[i] = gradient.Promotion{ID: fmt.Sprintf("p%05d", i), Metric: gradient.Quantity, Tiers: []gradient.Tier{
			{ID: "a", Threshold: decimal.NewFromInt(2), Reward: gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(5)}},
			{ID: "b", Threshold: decimal.NewFromInt(5), Reward: gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(10)}},
		}}
	}
	setup := func(fill int) *cache.Cache {
		t.Helper()
		srv := testredis.StartServer(t, "--enable-debug-command", "yes")
		rdb := srv.Client(&redis.Options{ReadTimeout: 10 * time.Minute})
		t.Cleanup(func() { _ = rdb.Close() })
		if fill > 0 {
			// Pipelined chunks of 1M, each under its own key prefix.
			pipe := rdb.Pipeline()
			for i := 0; i < fill; i += 1_000_000 {
				pipe.Do(ctx, "debug", "populate", min(1_000_000, fill-i), fmt.Sprintf("stray%d", i/1_000_000))
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatalf("DEBUG POPULATE: %v", err)
			}
			if got := rdb.DBSize(ctx).Val(); got < int64(fill) {
				t.Fatalf("DBSIZE %d after populating %d", got, fill)
			}
		}
		c, err := cache.New(rdb, cache.Options{Prefix: testredis.Prefix(t)})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i += cache.MaxRefreshBatch {
			if _, err := c.Refresh(ctx, ps[i:min(i+cache.MaxRefreshBatch, n)]...); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	empty, stray := setup(0), setup(strays)
	// Before the index: List SCANs.
	t0 := time.Now()
	if ins, err := stray.List(ctx); err != nil || len(ins) != n {
		t.Fatalf("SCAN List: %d, %v", len(ins), err)
	}
	scanList := time.Since(t0)
	for _, c := range []*cache.Cache{empty, stray} {
		if _, err := c.Reindex(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ops := []struct {
		name string
		run  func(c *cache.Cache) error
	}{
		{"List", func(c *cache.Cache) error {
			ins, err := c.List(ctx)
			if err == nil && len(ins) != n {
				err = fmt.Errorf("listed %d, want %d", len(ins), n)
			}
			return err
		}},
		{"warm -prune", func(c *cache.Cache) error {
			sum, err := warm.Warm(ctx, c, ps, warm.Options{Prune: true})
			if err == nil && len(sum.Pruned) != 0 {
				err = fmt.Errorf("pruned %v", sum.Pruned)
			}
			return err
		}},
	}
	bests := map[string][2]time.Duration{}
	for _, op := range ops {
		// Interleaved, best of 5 each: the machine is shared.
		best := [2]time.Duration{time.Hour, time.Hour}
		for range 5 {
			for k, c := range []*cache.Cache{empty, stray} {
				t0 := time.Now()
				if err := op.run(c); err != nil {
					t.Fatalf("%s: %v", op.name, err)
				}
				best[k] = min(best[k], time.Since(t0))
			}
		}
		ratio := float64(best[1]) / float64(best[0])
		t.Logf("%s, %d promotions: empty server %v, %d stray keys %v, ratio %.2f",
			op.name, n, best[0].Round(time.Millisecond), strays, best[1].Round(time.Millisecond), ratio)
		bests[op.name] = best
	}
	t.Logf("List by SCAN (unindexed prefix), %d stray keys: %v", strays, scanList.Round(time.Millisecond))
	// What the index must guarantee: List no longer walks the strays. The
	// 1.2x goal is not met (docs/benchmarks.md: each key lookup costs more
	// in a 10M-key table), so it is printed, not asserted.
	if l := bests["List"][1]; l*20 > scanList {
		t.Errorf("indexed List %v beside %d strays is not 20x faster than the SCAN List %v", l, strays, scanList)
	}
}
