package cache

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// TestCartGroupGiftsNotShared writes into the gift lists (and the tier
// copies that carry them) of a cart's results: two lines on one tier,
// lines on two tiers, from Redis and from a near cache's held lists.
// No other line of the cart, and no later cart, may see the writes; and
// the cart's gift lists come in one HMGET (one promotion version).
func TestCartGroupGiftsNotShared(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		hmgets := &countCmds{name: "hmget"}
		client := nearClient(t, b)
		client.AddHook(hmgets)
		caches := []struct {
			name string
			c    *Cache
		}{{"redis", newCacheOn(t, client, b.Prefix)}}
		if b.Mini == nil {
			caches = append(caches, struct {
				name string
				c    *Cache
			}{"near", newNearCache(t, nearClient(t, b), b.Prefix, Options{})})
		}
		p := simplePromotion("gifts", 1, 2, 5, 10)
		p.Tiers[2].Gifts = append(p.Tiers[2].Gifts, gradient.Gift{SKU: "second", Qty: 2, Name: "two"})
		if _, err := caches[0].c.Refresh(ctx, p); err != nil {
			t.Fatal(err)
		}
		qs := []Query{QuantityQuery("gifts", 5), QuantityQuery("gifts", 6), QuantityQuery("gifts", 12), QuantityQuery("gifts", 5)}
		for _, cc := range caches {
			// api=append prices every cart into the previous cart's
			// slice: its tier copies and gift lists must be new ones all
			// the same, never the previous cart's (which it wrote into).
			for _, api := range []string{"MatchCart", "append"} {
				var buf []Result
				var prevTiers []*TierHit
				var prevGifts []*gradient.Gift
				for round := 0; round < 3; round++ { // the near cache holds the lists from the second cart on
					before := hmgets.n.Load()
					var rs []Result
					var err error
					if api == "append" {
						buf, err = cc.c.AppendMatchCart(ctx, buf[:0], qs, MatchOptions{Gifts: true, Next: true})
						rs = buf
					} else {
						rs, err = cc.c.MatchCart(ctx, qs, MatchOptions{Gifts: true, Next: true})
					}
					if err != nil {
						t.Fatal(err)
					}
					checkGiftsNotShared(t, cc.name+" "+api, round, p, rs, before, hmgets.n.Load(), prevTiers, prevGifts)
					prevTiers, prevGifts = prevTiers[:0], prevGifts[:0]
					for i := range rs {
						prevTiers, prevGifts = append(prevTiers, rs[i].Tier), append(prevGifts, &rs[i].Tier.Gifts[0])
						g := rs[i].Tier.Gifts
						g[0].SKU, g[0].Qty = "mutated", -1
						rs[i].Tier.Gifts = append(g, gradient.Gift{SKU: "appended"})
						rs[i].Tier.ID = "mutated"
					}
				}
			}
			if cc.name == "near" && cc.c.NearStats().Hits == 0 {
				t.Fatal("near: no line answered from the held ladder")
			}
		}
	})
}

// checkGiftsNotShared checks one cart of TestCartGroupGiftsNotShared: one
// HMGET on the Redis path, every line's tier and gifts as p stores them,
// and no tier copy or gift list of the previous cart (prevTiers,
// prevGifts) reused.
func checkGiftsNotShared(t *testing.T, name string, round int, p gradient.Promotion, rs []Result, hmgetsBefore, hmgetsAfter int64, prevTiers []*TierHit, prevGifts []*gradient.Gift) {
	t.Helper()
	if n := hmgetsAfter - hmgetsBefore; strings.HasPrefix(name, "redis") && n != 1 {
		t.Fatalf("%s round %d: %d HMGETs for one promotion version, want 1", name, round, n)
	}
	for i, r := range rs {
		if r.Err != nil || r.Tier == nil || len(r.Tier.Gifts) == 0 {
			t.Fatalf("%s round %d line %d: %+v", name, round, i, r)
		}
		want := p.Tiers[map[int]int{0: 2, 1: 2, 2: 3, 3: 2}[i]]
		if r.Tier.ID != want.ID || !reflect.DeepEqual(r.Tier.Gifts, want.Gifts) {
			t.Fatalf("%s round %d line %d: tier %s gifts %v, want %s %v (a write into another result reached it)",
				name, round, i, r.Tier.ID, r.Tier.Gifts, want.ID, want.Gifts)
		}
		if slices.Contains(prevTiers, r.Tier) || slices.Contains(prevGifts, &r.Tier.Gifts[0]) {
			t.Fatalf("%s round %d line %d: the previous cart's tier copy or gift list", name, round, i)
		}
	}
}

// TestGiftsCopiesHandedInTiers: Cache.Gifts sets each Result's Tier to a
// copy carrying its list, on the Redis path (whose MatchCart without
// Gifts handed the caller its own tiers) and from a near cache (whose
// tiers are the held ladder's): the TierHit the caller kept from before
// stays without a list, and a later cart without Gifts gets none, while
// a cart with Gifts takes its lists on its own tiers.
func TestGiftsCopiesHandedInTiers(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		caches := []struct {
			name string
			c    *Cache
		}{{"redis", newCache(t, b, Options{})}}
		if b.Mini == nil {
			caches = append(caches, struct {
				name string
				c    *Cache
			}{"near", newNearCache(t, nearClient(t, b), b.Prefix, Options{})})
		}
		if _, err := caches[0].c.Refresh(ctx, simplePromotion("handed", 1, 2, 5, 10)); err != nil {
			t.Fatal(err)
		}
		qs := []Query{QuantityQuery("handed", 5), QuantityQuery("handed", 12)}
		for _, cc := range caches {
			for round := 0; round < 3; round++ { // the near cache holds the ladder from the first cart on
				rs, err := cc.c.MatchCart(ctx, qs, MatchOptions{})
				if err != nil {
					t.Fatal(err)
				}
				kept := make([]*TierHit, len(rs))
				for i := range rs {
					if rs[i].Err != nil || rs[i].Tier == nil || !rs[i].Tier.HasGifts || rs[i].Tier.Gifts != nil {
						t.Fatalf("%s round %d line %d: %+v before Gifts", cc.name, round, i, rs[i])
					}
					kept[i] = rs[i].Tier
				}
				if err := cc.c.Gifts(ctx, rs); err != nil {
					t.Fatal(err)
				}
				for i := range rs {
					if rs[i].Err != nil || len(rs[i].Tier.Gifts) == 0 {
						t.Fatalf("%s round %d line %d: %+v after Gifts", cc.name, round, i, rs[i])
					}
					if rs[i].Tier == kept[i] || kept[i].Gifts != nil {
						t.Fatalf("%s round %d line %d: Gifts wrote the list into the tier handed in", cc.name, round, i)
					}
					rs[i].Tier.Gifts[0].SKU = "mutated"
				}
				with, err := cc.c.MatchCart(ctx, qs, MatchOptions{Gifts: true})
				if err != nil {
					t.Fatal(err)
				}
				for i := range with {
					if with[i].Err != nil || len(with[i].Tier.Gifts) == 0 || with[i].Tier.Gifts[0].SKU == "mutated" {
						t.Fatalf("%s round %d line %d: %+v with Gifts", cc.name, round, i, with[i])
					}
				}
			}
		}
	})
}
