package warm_test

import (
	"context"
	"fmt"
	"strings"
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
// side by side on an empty private server and on one holding 10M stray
// keys (DEBUG POPULATE), and prints the ratios (10,000 promotions): first
// while the stray server's keyspace is still rehashing after the fill,
// then once the rehash has finished, the state a server holding 10M keys
// stays in. It asserts the indexed List is at least 20x faster than the
// SCAN List of an unindexed prefix, measured on the stray server.
func TestWarmStrayKeys(t *testing.T) {
	soak.Require(t, "fills a private server with 10M keys; TestIndexListNoScan in cache is the fast check")
	// Not parallel: the package's parallel tests (TestFaultOrderedSchedule,
	// with 1s load deadlines) start after it, so neither disturbs the
	// other's timings with 10M keys' worth of filling and measuring.
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
	var strayRDB *redis.Client
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
			strayRDB = rdb
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
	measure := func(state string) map[string][2]time.Duration {
		t.Helper()
		bests := map[string][2]time.Duration{}
		for _, op := range ops {
			// Interleaved, best of 9 each, the order swapped every round:
			// the machine is shared.
			best := [2]time.Duration{time.Hour, time.Hour}
			for round := range 9 {
				for i := range 2 {
					k := i ^ round%2
					c := []*cache.Cache{empty, stray}[k]
					t0 := time.Now()
					if err := op.run(c); err != nil {
						t.Fatalf("%s: %v", op.name, err)
					}
					best[k] = min(best[k], time.Since(t0))
				}
			}
			ratio := float64(best[1]) / float64(best[0])
			t.Logf("%s, %d promotions, %s: empty server %v, %d stray keys %v, ratio %.2f",
				op.name, n, state, best[0].Round(time.Millisecond), strays, best[1].Round(time.Millisecond), ratio)
			bests[op.name] = best
		}
		return bests
	}
	if rehashing(ctx, t, strayRDB) {
		measure("stray keyspace rehashing")
	}
	settleRehash(ctx, t, strayRDB)
	bests := measure("rehash finished")
	t.Logf("List by SCAN (unindexed prefix), %d stray keys: %v", strays, scanList.Round(time.Millisecond))
	// What the index must guarantee: List no longer walks the strays. The
	// 1.2x goal is printed, not asserted: what is left of the ratio is each
	// key lookup's cost in a 10M-key table, within the shared machine's
	// noise (docs/benchmarks.md).
	if l := bests["List"][1]; l*20 > scanList {
		t.Errorf("indexed List %v beside %d strays is not 20x faster than the SCAN List %v", l, strays, scanList)
	}
}

// settleRehash waits until the keyspace's hash table has finished growing.
// Filling 10M keys crosses 8,388,608 and starts a rehash to 16M buckets
// that Redis finishes in the background, 1 ms per cron tick: minutes at
// the default hz of 10. Until it ends every lookup searches both tables,
// and a measurement then compares the empty server with one mid-rehash,
// not with one that holds 10M keys (docs/benchmarks.md gives both). hz is
// raised for the wait and put back before anything is timed. The wait
// polls MEMORY STATS, which reads the table's sizes: DEBUG HTSTATS walks
// the whole table (about half a second of the server's time at 10M keys,
// a core taken from the tests beside this one), so it is asked only
// before and after.
func settleRehash(ctx context.Context, t *testing.T, rdb *redis.Client) {
	t.Helper()
	if !rehashing(ctx, t, rdb) {
		return
	}
	hz, err := rdb.ConfigGet(ctx, "hz").Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "hz", "500").Err(); err != nil {
		t.Fatal(err)
	}
	// The main table's overhead counts the buckets of both tables while
	// they rehash, and falls when the old one is freed.
	during := tableOverhead(ctx, t, rdb)
	deadline := time.Now().Add(5 * time.Minute)
	for tableOverhead(ctx, t, rdb) >= during {
		if time.Now().After(deadline) {
			t.Fatal("the keyspace was still rehashing after 5 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := rdb.ConfigSet(ctx, "hz", hz["hz"]).Err(); err != nil {
		t.Fatal(err)
	}
	if rehashing(ctx, t, rdb) {
		t.Fatal("the keyspace rehashes again after its table shrank")
	}
}

// tableOverhead is MEMORY STATS' db.0 overhead.hashtable.main: the
// keyspace's entries and the buckets of its tables.
func tableOverhead(ctx context.Context, t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	stats, err := rdb.Do(ctx, "memory", "stats").Result()
	if err != nil {
		t.Fatalf("MEMORY STATS: %v", err)
	}
	n, ok := field(field(stats, "db.0"), "overhead.hashtable.main").(int64)
	if !ok {
		t.Fatalf("MEMORY STATS has no db.0 overhead.hashtable.main: %v", stats)
	}
	return n
}

// field is the value of name in a reply that is a map (RESP3) or a flat
// list of names and values (RESP2), nil when absent.
func field(reply any, name string) any {
	switch r := reply.(type) {
	case map[any]any:
		return r[name]
	case []any:
		for i := 0; i+1 < len(r); i += 2 {
			if r[i] == name {
				return r[i+1]
			}
		}
	}
	return nil
}

// rehashing says whether db 0's keyspace table is being rehashed.
func rehashing(ctx context.Context, t *testing.T, rdb *redis.Client) bool {
	t.Helper()
	stats, err := rdb.Do(ctx, "debug", "htstats", "0").Text()
	if err != nil {
		t.Fatalf("DEBUG HTSTATS: %v", err)
	}
	return strings.Contains(stats, "rehashing target")
}
