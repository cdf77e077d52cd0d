package budget_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// cartCache is a cache under b's prefix holding one-tier promotions
// ("2+" items, 10% off) with the IDs given.
func cartCache(t *testing.T, ctx context.Context, b *testredis.Backend, near bool, ids ...string) *cache.Cache {
	t.Helper()
	opts := cache.Options{Prefix: b.Prefix}
	if near {
		opts.NearCache = &cache.NearCacheOptions{}
	}
	c, err := cache.New(b.Client, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	for _, id := range ids {
		if _, err := c.Refresh(ctx, gradient.Promotion{ID: id, Metric: gradient.Quantity, Tiers: []gradient.Tier{{ID: "2+",
			Threshold: decimal.NewFromInt(2), Reward: gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(10)}}}}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// TestOffers: a cart's hits say whether their promotion can still be
// given: a promotion exhausted for one customer is flagged for that
// customer only, one exhausted in all for everyone; a hit the budget does
// not know is not capped, a line without a hit is not asked about, and a
// missing per-customer value is a *ValidationError naming it, sent
// nowhere.
func TestOffers(t *testing.T) {
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		bg := newBudget(t, ctx, b, budget.Options{},
			budget.Promotion{ID: "sale", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 2}, {Measure: budget.Uses, Limit: 1, Per: "customer"}}},
			budget.Promotion{ID: "gift", Caps: []budget.Cap{{Measure: budget.Spend, Limit: 100, Per: "customer"}}})
		c := cartCache(t, ctx, b, false, "sale", "gift", "free")
		cart := []cache.Query{cache.QuantityQuery("sale", 3), cache.QuantityQuery("gift", 2),
			cache.QuantityQuery("free", 5), cache.QuantityQuery("sale", 1)}
		offers := func(cust string) []budget.Offer {
			t.Helper()
			rs, err := c.MatchCart(ctx, cart, cache.MatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			os, err := bg.Offers(ctx, customer(cust), rs)
			if err != nil {
				t.Fatal(err)
			}
			if len(os) != len(cart) {
				t.Fatalf("%d offers for %d lines", len(os), len(cart))
			}
			return os
		}
		type want struct {
			ok   [3]bool // sale, gift, free
			left [2]budget.Left
		}
		check := func(step, cust string, w want) {
			t.Helper()
			os := offers(cust)
			for i, o := range os[:3] {
				if !o.Hit || o.OK != w.ok[i] || o.Promotion != cart[i].Promotion || o.Budgeted != (i < 2) {
					t.Errorf("%s: %s line %d: %+v, want ok %v", step, cust, i, o, w.ok[i])
				}
			}
			for i, l := range w.left {
				if os[i].Left != l {
					t.Errorf("%s: %s %s left %+v, want %+v", step, cust, os[i].Promotion, os[i].Left, l)
				}
			}
			if os[2].Left != (budget.Left{Uses: budget.NoCap, Spend: budget.NoCap}) {
				t.Errorf("%s: unbudgeted hit left %+v", step, os[2].Left)
			}
			if o := os[3]; o.Hit || o.Budgeted || o.OK || o.Promotion != "sale" {
				t.Errorf("%s: a line without a hit: %+v", step, o)
			}
		}
		fresh := want{ok: [3]bool{true, true, true}, left: [2]budget.Left{{Uses: 1, Spend: budget.NoCap}, {Uses: budget.NoCap, Spend: 100}}}
		check("fresh", "c1", fresh)
		reserve := func(order, cust string, ls ...budget.Line) {
			t.Helper()
			if _, err := bg.Reserve(ctx, budget.Request{Order: order, Attributes: customer(cust), Lines: ls, Hold: time.Minute}); err != nil {
				t.Fatal(err)
			}
		}
		reserve("o1", "c1", budget.Line{Promotion: "sale", Uses: 1}, budget.Line{Promotion: "gift", Uses: 1, Amount: 100})
		check("c1 used both", "c1", want{ok: [3]bool{false, false, true}, left: [2]budget.Left{{Uses: 0, Spend: budget.NoCap}, {Uses: budget.NoCap, Spend: 0}}})
		check("c1 used both", "c2", fresh)
		reserve("o2", "c2", budget.Line{Promotion: "sale", Uses: 1}, budget.Line{Promotion: "gift", Uses: 1, Amount: 60})
		c2 := want{ok: [3]bool{false, true, true}, left: [2]budget.Left{{Uses: 0, Spend: budget.NoCap}, {Uses: budget.NoCap, Spend: 40}}}
		check("sale used up", "c2", c2)
		if l := offers("c2")[1].Left; !l.Allows(1, 40) || l.Allows(1, 41) {
			t.Errorf("Allows on %+v: 40 must fit, 41 not", l)
		}
		check("sale used up", "c3", want{ok: [3]bool{false, true, true}, left: [2]budget.Left{{Uses: 0, Spend: budget.NoCap}, {Uses: budget.NoCap, Spend: 100}}})

		rs, err := c.MatchCart(ctx, cart, cache.MatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rt, err := testredis.CountRoundTrips(ctx, b.Client)
		if err != nil {
			t.Fatal(err)
		}
		rt.Reset()
		_, err = bg.Offers(ctx, nil, rs)
		if !errors.Is(err, &budget.ValidationError{Field: "attributes"}) || !errors.Is(err, budget.ErrInvalid) {
			t.Fatalf("no customer: %v, want a ValidationError naming attributes", err)
		}
		// Nothing sent (a cluster client's own slot refreshes aside).
		if n := rt.Total(); n != 0 && !b.IsCluster() {
			t.Fatalf("a refused Offers sent %d round trips", n)
		}
		// Only unbudgeted hits and misses: nothing to ask, no attributes needed.
		none, err := bg.Offers(ctx, nil, rs[2:])
		if err != nil || len(none) != 2 || !none[0].OK || none[1].Hit {
			t.Fatalf("no budgeted hit: %+v %v", none, err)
		}
	})
}

// TestOffersRoundTrips counts a priced cart's round trips: the match and
// the offers. From Redis the match is one and Offers one more; with the
// near cache holding the ladders the match is none, so the cart is one
// in all. A cart with no budgeted hit costs Offers nothing.
func TestOffersRoundTrips(t *testing.T) {
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		if b.IsCluster() {
			// A cluster pipeline goes to each master it names, in parallel,
			// with the client's own slot refreshes: the count is a single
			// server's (TestOffers checks the answers on every backend).
			t.Skip("round trips are counted on a single server")
		}
		bg := newBudget(t, ctx, b, budget.Options{},
			budget.Promotion{ID: "sale", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 5, Per: "customer"}}},
			budget.Promotion{ID: "gift", Caps: []budget.Cap{{Measure: budget.Spend, Limit: 100}}})
		cart := []cache.Query{cache.QuantityQuery("sale", 3), cache.QuantityQuery("gift", 2), cache.QuantityQuery("free", 2)}
		for _, near := range []bool{false, true} {
			c := cartCache(t, ctx, b, near, "sale", "gift", "free")
			match := func() []cache.Result {
				t.Helper()
				rs, err := c.MatchCart(ctx, cart, cache.MatchOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return rs
			}
			if near {
				// The ladders are held once tracking is up and a read
				// installed them: poll until a match is answered from memory.
				deadline := time.Now().Add(10 * time.Second)
				for before := c.NearStats().Hits; ; {
					match()
					if c.NearStats().Hits >= before+int64(len(cart)) {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("near cache not answering in 10 s: %+v", c.NearStats())
					}
					time.Sleep(time.Millisecond)
				}
			}
			// Warm: a connection's set-up commands and the script's first
			// load (EVALSHA, NOSCRIPT, EVAL) are not a cart's.
			if _, err := bg.Offers(ctx, customer("c"), match()); err != nil {
				t.Fatal(err)
			}
			rt, err := testredis.CountRoundTrips(ctx, b.Client)
			if err != nil {
				t.Fatal(err)
			}
			wantMatch := 1
			if near {
				wantMatch = 0
			}
			for range 3 {
				rt.Reset()
				rs := match()
				m := rt.Total()
				os, err := bg.Offers(ctx, customer("c"), rs)
				if err != nil {
					t.Fatal(err)
				}
				if !os[0].OK || !os[1].OK || !os[2].OK || !os[0].Budgeted || os[2].Budgeted {
					t.Fatalf("offers %+v", os)
				}
				if m != wantMatch || rt.Total() != wantMatch+1 {
					t.Fatalf("near %v: match %d round trips, with offers %d; want %d and %d (%v)", near, m, rt.Total(), wantMatch, wantMatch+1, rt.PerNode())
				}
				rt.Reset()
				if _, err := bg.Offers(ctx, customer("c"), rs[2:]); err != nil || rt.Total() != 0 {
					t.Fatalf("near %v: no budgeted hit: %d round trips, %v", near, rt.Total(), err)
				}
			}
		}
	})
}
