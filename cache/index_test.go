package cache

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// listIDsOf is the sorted IDs List returns.
func listIDsOf(t *testing.T, ctx context.Context, c *Cache) []string {
	t.Helper()
	ins, err := c.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	ids := make([]string, len(ins))
	for i, in := range ins {
		ids[i] = in.ID
	}
	sort.Strings(ids)
	return ids
}

// legacyWrite leaves id stored the way a v0.1.0 writer does: the
// promotion whole, its ID in no index.
func legacyWrite(t *testing.T, ctx context.Context, c *Cache, p gradient.Promotion) {
	t.Helper()
	if _, err := c.Refresh(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := c.client.SRem(ctx, c.indexKey(p.ID), p.ID).Err(); err != nil {
		t.Fatal(err)
	}
}

func promoIDs(ps []gradient.Promotion) []string {
	ids := make([]string, len(ps))
	for i := range ps {
		ids[i] = ps[i].ID
	}
	sort.Strings(ids)
	return ids
}

// TestIndexList walks a prefix through the index's life on every backend:
// v0.1.0 promotions found by SCAN before the mark, Reindex adopting them,
// Delete and a vanished meta key leaving the list, and Unindexed naming a
// promotion written past the index.
func TestIndexList(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b, Options{})
		ps := faultPromos(11, 30, 4)
		if _, err := c.Refresh(ctx, ps[:20]...); err != nil {
			t.Fatal(err)
		}
		for _, p := range ps[20:] {
			legacyWrite(t, ctx, c, p)
		}
		check := func(step string, want []string) {
			t.Helper()
			if got := listIDsOf(t, ctx, c); !slices.Equal(got, want) {
				t.Fatalf("%s: List = %v, want %v", step, got, want)
			}
			got, err := c.IDs(ctx)
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("%s: IDs = %v, %v, want %v", step, got, err, want)
			}
		}
		check("unmarked, SCAN", promoIDs(ps))
		if un, err := c.Unindexed(ctx); err != nil || un != nil {
			t.Fatalf("Unindexed before the mark = %v, %v, want nil", un, err)
		}
		res, err := c.Reindex(ctx)
		if err != nil || res.Added != 10 || res.Pruned != 0 {
			t.Fatalf("Reindex = %+v, %v, want 10 added", res, err)
		}
		check("marked", promoIDs(ps))

		if _, err := c.Delete(ctx, ps[0].ID, 0); err != nil {
			t.Fatal(err)
		}
		// An expired meta key: gone with its ID still indexed.
		if err := c.client.Del(ctx, c.metaKey(ps[1].ID)).Err(); err != nil {
			t.Fatal(err)
		}
		live := promoIDs(ps[2:])
		check("after Delete and a lost meta", live)
		if n, err := c.client.SIsMember(ctx, c.indexKey(ps[1].ID), ps[1].ID).Result(); err != nil || n {
			t.Fatalf("List left %s in the index (%v)", ps[1].ID, err)
		}

		late := simplePromotion("late-legacy", 1, 5)
		legacyWrite(t, ctx, c, late)
		check("a legacy write after the mark is not listed", live)
		if un, err := c.Unindexed(ctx); err != nil || !slices.Equal(un, []string{late.ID}) {
			t.Fatalf("Unindexed = %v, %v, want [%s]", un, err, late.ID)
		}
		if res, err := c.Reindex(ctx); err != nil || res.Added != 1 {
			t.Fatalf("second Reindex = %+v, %v", res, err)
		}
		check("repaired", promoIDs(append(slices.Clone(ps[2:]), late)))
	})
}

// TestIndexListNoScan fills a private server with stray keys and checks
// that List, IDs and a pruning warm on a marked prefix never SCAN: their
// cost cannot grow with the keyspace.
func TestIndexListNoScan(t *testing.T) {
	t.Parallel()
	srv := testredis.StartServer(t, "--enable-debug-command", "yes")
	rdb := srv.Client(&redis.Options{})
	ctx := testCtx(t)
	if err := rdb.Do(ctx, "debug", "populate", 200000, "stray").Err(); err != nil {
		t.Skipf("DEBUG POPULATE refused (%v): this test needs a server that fills strays fast", err)
	}
	c, err := New(rdb, Options{Prefix: testredis.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	ps := faultPromos(5, 300, 3)
	if _, err := c.Refresh(ctx, ps...); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reindex(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if got := listIDsOf(t, ctx, c); !slices.Equal(got, promoIDs(ps)) {
		t.Fatalf("List: %d IDs, want %d", len(got), len(ps))
	}
	if ids, err := c.IDs(ctx); err != nil || len(ids) != len(ps) {
		t.Fatalf("IDs: %d, %v", len(ids), err)
	}
	stats, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stats, "cmdstat_scan:") || strings.Contains(stats, "cmdstat_keys:") {
		t.Fatalf("List or IDs walked the keyspace:\n%s", stats)
	}
	if !strings.Contains(stats, "cmdstat_smembers:") {
		t.Fatalf("no SMEMBERS: the index was not read:\n%s", stats)
	}
}

// TestFaultIndexCutReply cuts the EXEC reply of Refresh and Delete at
// many points (the client never learns whether its write committed) and checks, after each, that List names
// exactly the promotions whose meta key exists: the index changes in the
// write's own transaction, so there is no window to bound.
func TestFaultIndexCutReply(t *testing.T) {
	t.Parallel()
	env := newFaultEnv(t)
	ctx := testCtx(t)
	if _, err := env.direct.Reindex(ctx); err != nil {
		t.Fatal(err)
	}
	ps := faultPromos(3, 12, 3)
	truth := func() []string {
		t.Helper()
		ids, err := env.direct.ScanIDs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	for round := 1; round <= 6; round++ {
		env.proxy.CutNext(1, nth(round, "\r\nexec\r\n"))
		_, rerr := env.cut.Refresh(ctx, ps...)
		if rerr == nil || env.proxy.Cuts() != int64(2*round-1) {
			t.Fatalf("round %d: Refresh with a cut EXEC: %v, %d cuts", round, rerr, env.proxy.Cuts())
		}
		for i := range ps {
			ps[i].Tiers[0].ID = fmt.Sprintf("round-%d", round) // new content: every promotion rewritten next round
		}
		if want, got := truth(), listIDsOf(t, ctx, env.direct); !slices.Equal(got, want) {
			t.Fatalf("round %d after a cut Refresh (%v): List %v, stored %v", round, rerr, got, want)
		}
		env.proxy.CutNext(1, nth(1, "\r\nexec\r\n"))
		_, derr := env.cut.Delete(ctx, ps[round].ID, 0)
		if want, got := truth(), listIDsOf(t, ctx, env.direct); !slices.Equal(got, want) {
			t.Fatalf("round %d after a cut Delete (%v): List %v, stored %v", round, derr, got, want)
		}
	}
	if n := env.proxy.Cuts(); n != 12 {
		t.Fatalf("%d replies cut, want 12", n)
	}
}
