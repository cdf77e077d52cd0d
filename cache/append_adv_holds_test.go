package cache

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// advJunk says which of a junk slot's values shows in an appended Result.
func advJunk(r Result, snap []advSlot) string {
	if r.Promotion == "junk" || r.Version == "junk-version" || (r.Err != nil && r.Err.Error() == "junk") {
		return fmt.Sprintf("old Result fields: %+v", r)
	}
	for _, s := range snap {
		if r.Tier == s.r.Tier || r.Next == s.r.Next || r.Tier != nil && len(r.Tier.Gifts) > 0 && len(s.r.Tier.Gifts) > 0 && &r.Tier.Gifts[0] == &s.r.Tier.Gifts[0] {
			return "an old TierHit or gift list"
		}
	}
	return ""
}

// advAmountPromotion is an amount promotion (cents) with gifts on its top
// tier only.
func advAmountPromotion(id string) gradient.Promotion {
	p := gradient.Promotion{ID: id, Metric: gradient.Amount, MinorDigits: 2}
	for i, th := range []string{"10.00", "50.50", "100"} {
		p.Tiers = append(p.Tiers, gradient.Tier{ID: "a" + strconv.Itoa(i), Threshold: decimal.RequireFromString(th),
			Reward: gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(int64(5 + i))}})
	}
	p.Tiers[2].Gifts = []gradient.Gift{{SKU: "amt-gift", Qty: 1}}
	return p
}

// advCart is a cart with every kind of line: no tier, hits with gifts and
// without, the top tier, duplicates, a missing promotion, bad values and
// IDs, extremes, a metric mismatch.
func advCart() []Query {
	return []Query{
		QuantityQuery("q", 0),             // no tier, Next tier0
		QuantityQuery("q", 5),             // tier1 (gifts)
		QuantityQuery("q", 12),            // top: Next nil
		QuantityQuery("q", 5),             // duplicate line
		QuantityQuery("missing", 1),       // ErrNotFound
		QuantityQuery("q", -1),            // bad value
		QuantityQuery("", 1),              // bad ID
		QuantityQuery("q{x}", 1),          // bad ID
		QuantityQuery("q", math.MaxInt64), // extreme
		AmountQuery("q", decimal.NewFromInt(3)),
		AmountQuery("a", decimal.RequireFromString("50.499")),    // floored below a1
		AmountQuery("a", decimal.RequireFromString("1e40")),      // beyond any score
		AmountQuery("a", decimal.RequireFromString("100.00")),    // top, gifts
		AmountQuery("a", decimal.RequireFromString("-0.001")),    // negative
		AmountQuery("a", decimal.RequireFromString("0.0000001")), // floors to 0
		QuantityQuery("a", 60),                                   // metric mismatch
		QuantityQuery("q", 2),
	}
}

// TestAdvAppendShapes appends the kitchen-sink cart into every shape of
// dst (nil, empty with capacity, full, dirty spare capacity that fits,
// dirty spare capacity that does not), with every MatchOptions, on the
// Redis path, a near cache and a Loader. The appended part must equal
// MatchCart's answer and show nothing of the old slots; dst[:len(dst)],
// and the slots past the appended part, stay as they were; a grown
// result leaves dst's array alone (strconv.AppendInt).
func TestAdvAppendShapes(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		ps := []gradient.Promotion{simplePromotion("q", 2, 5, 10), advAmountPromotion("a")}
		type cacheCase struct {
			name string
			c    *Cache
		}
		caches := []cacheCase{{"redis", newCache(t, b, Options{})}}
		ld := &countingLoader{promos: map[string]gradient.Promotion{"q": ps[0], "a": ps[1]}}
		lc, err := New(b.Client, Options{Prefix: b.Prefix + ":ld", Loader: ld})
		if err != nil {
			t.Fatal(err)
		}
		caches = append(caches, cacheCase{"loader", lc})
		if b.Real() {
			caches = append(caches, cacheCase{"near", newNearCache(t, nearClient(t, b), b.Prefix, Options{})},
				cacheCase{"near-loader", newNearCache(t, nearClient(t, b), b.Prefix+":nl", Options{Loader: ld})})
		}
		if _, err := caches[0].c.Refresh(ctx, ps...); err != nil {
			t.Fatal(err)
		}
		qs := advCart()
		for _, cc := range caches {
			for _, opt := range matchOpts {
				for _, tc := range []struct {
					name     string
					n, extra int
					nilDst   bool
				}{
					{"nil", 0, 0, true},
					{"empty with capacity", 0, len(qs) + 7, false},
					{"full", 3, 0, false},
					{"dirty spare fits", 2, len(qs) + 5, false},
					{"dirty spare exact", 2, len(qs), false},
					{"dirty spare short", 2, len(qs) - 3, false},
				} {
					name := fmt.Sprintf("%s/%s/%+v", cc.name, tc.name, opt)
					var dst []Result
					var snap []advSlot
					if !tc.nilDst {
						dst, snap = advDirty(tc.n, tc.extra)
					}
					arr := dst[:cap(dst)]
					got, err := cc.c.AppendMatchCart(ctx, dst, qs, opt)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					want, err := cc.c.MatchCart(ctx, qs, opt)
					if err != nil {
						t.Fatalf("%s: MatchCart: %v", name, err)
					}
					if len(got) != len(dst)+len(qs) {
						t.Fatalf("%s: len %d, want %d", name, len(got), len(dst)+len(qs))
					}
					for i := range dst {
						if d := advSlotChanged(got, snap, i); d != "" {
							t.Fatalf("%s: dst[:len(dst)]: %s", name, d)
						}
					}
					grown := cap(dst) < len(dst)+len(qs)
					for i := len(dst); i < len(arr); i++ {
						if i < len(dst)+len(qs) && !grown {
							continue
						}
						if d := advSlotChanged(arr, snap, i); d != "" {
							t.Fatalf("%s: dst's array past the appended part (grown %v): %s", name, grown, d)
						}
					}
					for i, r := range got[len(dst):] {
						if d := advJunk(r, snap); d != "" {
							t.Fatalf("%s: line %d: %s", name, i, d)
						}
						if d := advLineRules(qs[i], r, opt); d != "" {
							t.Fatalf("%s: line %d: %s", name, i, d)
						}
					}
					if d := sameResults(want, got[len(dst):]); d != "" {
						t.Fatalf("%s: vs MatchCart: %s", name, d)
					}
				}
			}
		}
	})
}

// advLineRules checks what the Result and MatchOptions docs promise of
// any line: its promotion, Tier only with a nil (or gift-fetch) Err,
// Next and Shortfall only with MatchOptions.Next, no gift lists without
// MatchOptions.Gifts, a Version whenever a ladder answered.
func advLineRules(q Query, r Result, opt MatchOptions) string {
	giftErr := errors.Is(r.Err, ErrGiftsGone) || errors.Is(r.Err, ErrDamaged) || errors.Is(r.Err, ErrCorrupt)
	switch {
	case r.Promotion != q.Promotion:
		return fmt.Sprintf("promotion %q, want %q", r.Promotion, q.Promotion)
	case r.Tier != nil && r.Err != nil && !giftErr:
		return fmt.Sprintf("tier %s with err %v", r.Tier.ID, r.Err)
	case r.Tier == nil && r.Err == nil:
		return "no tier and no error"
	case !opt.Next && (r.Next != nil || !r.Shortfall.IsZero()):
		return fmt.Sprintf("next %+v shortfall %s without MatchOptions.Next", r.Next, r.Shortfall)
	case r.Next == nil && !r.Shortfall.IsZero():
		return fmt.Sprintf("shortfall %s with no next tier", r.Shortfall)
	case r.Next != nil && !r.Shortfall.IsPositive():
		return fmt.Sprintf("shortfall %s to next %s", r.Shortfall, r.Next.ID)
	case !opt.Gifts && r.Tier != nil && r.Tier.Gifts != nil:
		return "gift list without MatchOptions.Gifts"
	case opt.Gifts && r.Err == nil && r.Tier.HasGifts && len(r.Tier.Gifts) == 0:
		return "MatchOptions.Gifts: a hit with gifts came without its list"
	case (r.Err == nil || errors.Is(r.Err, ErrNoTier)) && r.Version == "":
		return "answered without a Version"
	}
	var ve *ValidationError
	if errors.As(r.Err, &ve) && ve.Field != "query" && ve.Field != "id" {
		return fmt.Sprintf("per-line ValidationError with Field %q", ve.Field)
	}
	return ""
}

// TestAdvAppendEmptyCart: a cart of no lines appends nothing and returns
// dst as it came (nil stays nil), with no error.
func TestAdvAppendEmptyCart(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	b := testredis.Mini(t)
	c := newCache(t, b, Options{})
	dst, _ := advDirty(2, 3)
	for _, tc := range []struct {
		name string
		dst  []Result
		qs   []Query
	}{
		{"nil dst, nil qs", nil, nil},
		{"nil dst, empty qs", nil, []Query{}},
		{"dirty dst, nil qs", dst, nil},
		{"empty dst, empty qs", dst[:0], []Query{}},
	} {
		got, err := c.AppendMatchCart(ctx, tc.dst, tc.qs, MatchOptions{Next: true, Gifts: true})
		if err != nil || len(got) != len(tc.dst) || (got == nil) != (tc.dst == nil) || cap(got) != cap(tc.dst) {
			t.Fatalf("%s: len %d cap %d nil %v err %v; want dst back (len %d cap %d nil %v)",
				tc.name, len(got), cap(got), got == nil, err, len(tc.dst), cap(tc.dst), tc.dst == nil)
		}
	}
}

// advHookRT counts round trips on a client: one per command sent alone,
// one per pipeline.
type advHookRT struct{ n atomic.Int64 }

func (h *advHookRT) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *advHookRT) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *advHookRT) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}

// TestAdvAppendRoundTrips: ONE round trip per cart whatever its lines
// and tiers, plus one only with MatchOptions.Gifts and a hit with gifts;
// every line as the oracle says, into a reused dst.
func TestAdvAppendRoundTrips(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		if b.IsCluster() {
			t.Skip("a Cluster sends one round trip per master; this counts a single server's")
		}
		noGifts := simplePromotion("nogifts", 1, 3, 9)
		for i := range noGifts.Tiers {
			noGifts.Tiers[i].Gifts = nil
		}
		ps := []gradient.Promotion{simplePromotion("gifts", 2, 5, 10), noGifts}
		for i := range 30 {
			ps = append(ps, simplePromotion("many"+strconv.Itoa(i), 1, 2, 3, 4, 5, 6, 7, 8))
		}
		ms := map[string]*gradient.Matcher{}
		for _, p := range ps {
			m, err := gradient.NewMatcher(p)
			if err != nil {
				t.Fatal(err)
			}
			ms[p.ID] = m
		}
		hook := &advHookRT{}
		client := nearClient(t, b)
		client.AddHook(hook)
		c := newCacheOn(t, client, b.Prefix)
		if _, err := c.Refresh(ctx, ps...); err != nil {
			t.Fatal(err)
		}
		many := make([]Query, 0, 300)
		for i := range 300 {
			many = append(many, QuantityQuery("many"+strconv.Itoa(i%30), int64(i%11)))
		}
		var buf []Result
		for _, tc := range []struct {
			name      string
			qs        []Query
			giftsHits bool
		}{
			{"one line below", []Query{QuantityQuery("gifts", 1)}, false},
			{"one line hit", []Query{QuantityQuery("gifts", 5)}, true},
			{"no hit has gifts", []Query{QuantityQuery("nogifts", 4), QuantityQuery("gifts", 0), QuantityQuery("nogifts", 100)}, false},
			{"duplicates with gifts", []Query{QuantityQuery("gifts", 5), QuantityQuery("gifts", 5), QuantityQuery("gifts", 11)}, true},
			{"300 lines, 30 promotions", many, true},
		} {
			for _, opt := range matchOpts {
				before := hook.n.Load()
				var err error
				buf, err = c.AppendMatchCart(ctx, buf[:0], tc.qs, opt)
				if err != nil {
					t.Fatalf("%s %+v: %v", tc.name, opt, err)
				}
				want := int64(1)
				if opt.Gifts && tc.giftsHits {
					want = 2
				}
				if n := hook.n.Load() - before; n != want {
					t.Errorf("%s %+v: %d round trips, want %d", tc.name, opt, n, want)
				}
				for i, r := range buf {
					if v, d := verdict(ms[tc.qs[i].Promotion], tc.qs[i].Value.IntPart(), r, opt); v != vOK {
						t.Fatalf("%s %+v line %d: %s %s", tc.name, opt, i, v, d)
					}
					if d := advLineRules(tc.qs[i], r, opt); d != "" {
						t.Fatalf("%s %+v line %d: %s", tc.name, opt, i, d)
					}
				}
			}
		}
	})
}

// TestAdvAppendAliasing: dst's array shared with a slice the caller still
// holds (the previous cart's results, re-sliced), and gift lists on a
// reused dst: the previous cart's results, written into after the next
// call, never reach it, nor the other way round, with and without a
// near cache.
func TestAdvAppendAliasing(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		p := simplePromotion("al", 1, 3, 6)
		p.Tiers[1].Gifts = append(p.Tiers[1].Gifts, gradient.Gift{SKU: "two", Qty: 2})
		type cacheCase struct {
			name string
			c    *Cache
		}
		caches := []cacheCase{{"redis", newCache(t, b, Options{})}}
		if b.Real() {
			caches = append(caches, cacheCase{"near", newNearCache(t, nearClient(t, b), b.Prefix, Options{})})
		}
		if _, err := caches[0].c.Refresh(ctx, p); err != nil {
			t.Fatal(err)
		}
		qs := []Query{QuantityQuery("al", 3), QuantityQuery("al", 4), QuantityQuery("al", 7), QuantityQuery("al", 0)}
		wantIDs := []string{"tier1", "tier1", "tier2", ""}
		opt := MatchOptions{Next: true, Gifts: true}
		for _, cc := range caches {
			for _, keep := range []int{0, 1, 2, 4} { // results of the previous cart kept ahead of the new ones
				prev, err := cc.c.AppendMatchCart(ctx, make([]Result, 0, 16), qs, opt)
				if err != nil {
					t.Fatal(err)
				}
				held := prev // the caller still holds the previous cart
				keptTier := make([]*TierHit, keep)
				for i := range keep {
					keptTier[i] = held[i].Tier
				}
				got, err := cc.c.AppendMatchCart(ctx, prev[:keep], qs, opt)
				if err != nil {
					t.Fatal(err)
				}
				name := fmt.Sprintf("%s keep %d", cc.name, keep)
				for i := range keep {
					if got[i].Tier != keptTier[i] || held[i].Tier != keptTier[i] {
						t.Fatalf("%s: kept result %d replaced", name, i)
					}
				}
				// Write into everything the previous cart returned that
				// the new one did not overwrite, and into the new cart.
				for i := range keep {
					advScribble(held[i].Tier)
				}
				for i, r := range got[keep:] {
					if slices.Contains(keptTier, r.Tier) && r.Tier != nil {
						t.Fatalf("%s line %d: a kept result's tier copy", name, i)
					}
					if r.Tier == nil {
						if wantIDs[i] != "" {
							t.Fatalf("%s line %d: no tier (%v)", name, i, r.Err)
						}
						continue
					}
					if r.Tier.ID != wantIDs[i] || !reflect.DeepEqual(r.Tier.Gifts, p.Tiers[tierIndex(wantIDs[i])].Gifts) {
						t.Fatalf("%s line %d: tier %s gifts %v: a write into the previous cart reached it", name, i, r.Tier.ID, r.Tier.Gifts)
					}
				}
				for i := range got[keep:] {
					advScribble(got[keep+i].Tier)
				}
				for i, h := range prevTierOf(ctx, t, cc.c, qs, opt) {
					if h != nil && (h.ID != wantIDs[i] || !reflect.DeepEqual(h.Gifts, p.Tiers[tierIndex(wantIDs[i])].Gifts)) {
						t.Fatalf("%s line %d: an earlier cart's writes reached a later one: %+v", name, i, *h)
					}
				}
			}
		}
	})
}

// prevTierOf prices qs into a fresh slice and returns the tiers.
func prevTierOf(ctx context.Context, t *testing.T, c *Cache, qs []Query, opt MatchOptions) []*TierHit {
	t.Helper()
	rs, err := c.MatchCart(ctx, qs, opt)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*TierHit, len(rs))
	for i := range rs {
		out[i] = rs[i].Tier
	}
	return out
}

// advScribble writes into a tier copy MatchOptions.Gifts returned: its ID
// and its gift list, in place and past its end.
func advScribble(h *TierHit) {
	if h == nil {
		return
	}
	h.ID = "scribbled"
	if len(h.Gifts) > 0 {
		h.Gifts[0].SKU, h.Gifts[0].Qty = "scribbled", -1
		h.Gifts = append(h.Gifts[:1], gradient.Gift{SKU: "appended"})
	}
}

// tierIndex is the index in simplePromotion's tier ID "tierN".
func tierIndex(id string) int {
	n, _ := strconv.Atoi(id[len("tier"):])
	return n
}

// TestAdvAppendConcurrentRevisions: goroutines each pricing carts into a
// dst of their own, reused, under -race against one near cache while a
// writer republishes the promotion and deletes it between revisions. A
// goroutine never gets a line from a revision older than one it already
// saw, every line is right for its revision, and one Version always
// names one revision.
func TestAdvAppendConcurrentRevisions(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		const revs, readers, minCarts = 60, 6, 150
		c := newNearCache(t, nearClient(t, b), b.Prefix, Options{})
		writer := newCache(t, b, Options{})
		id := "advconc"
		promos, ladders := stepRevisions(t, id, revs)
		if _, err := writer.Refresh(ctx, promos[1]); err != nil {
			t.Fatal(err)
		}
		var versions sync.Map   // Version -> revision
		var spread atomic.Int64 // revisions seen, summed over readers
		var done atomic.Bool
		errs := make(chan error, readers+1)
		var wg sync.WaitGroup
		wg.Add(readers + 1)
		// The writer starts once every reader has priced a cart, so that
		// the readers run across the revisions, not after them.
		var started sync.WaitGroup
		started.Add(readers)
		go func() {
			defer wg.Done()
			defer done.Store(true)
			started.Wait()
			for rev := int64(2); rev <= revs; rev++ {
				if rev%5 == 0 {
					if _, err := writer.Delete(ctx, id, 0); err != nil {
						errs <- err
						return
					}
				}
				if _, err := writer.Refresh(ctx, promos[rev]); err != nil {
					errs <- err
					return
				}
			}
		}()
		for g := range readers {
			go func(g int) {
				defer wg.Done()
				opt := matchOpts[g%len(matchOpts)]
				opt.Next = true // the next tier names the revision when no tier is reached
				var buf []Result
				var seen int64
				revsSeen := map[int64]bool{}
				var once sync.Once
				defer once.Do(started.Done)
				defer func() { spread.Add(int64(len(revsSeen))) }()
				qs := make([]Query, 9)
				// Until the writer is done and this reader has seen its
				// last revision (the near cache learns it from an
				// invalidation, so poll, up to 20 s).
				deadline := time.Now().Add(20 * time.Second)
				for k := 0; !done.Load() || seen < revs || k < minCarts; k++ {
					if k == 1 {
						once.Do(started.Done)
					}
					if time.Now().After(deadline) {
						errs <- fmt.Errorf("reader %d: revision %d after 20 s, want %d", g, seen, revs)
						return
					}
					for i := range qs {
						qs[i] = QuantityQuery(id, int64((k*7+i*5+g)%70))
					}
					var err error
					buf, err = c.AppendMatchCart(ctx, buf[:0], qs, opt)
					if err != nil {
						errs <- err
						return
					}
					floor := seen
					for i, r := range buf {
						if errors.Is(r.Err, ErrNotFound) {
							continue // deleted between two revisions
						}
						rev, ok := lineRev(r, revs)
						if !ok {
							errs <- fmt.Errorf("reader %d cart %d line %d: tier %+v next %+v: no revision, or two", g, k, i, r.Tier, r.Next)
							return
						}
						if rev < floor {
							errs <- fmt.Errorf("reader %d cart %d line %d: revision %d after this reader saw %d", g, k, i, rev, floor)
							return
						}
						if v, d := verdict(ladders[rev], qs[i].Value.IntPart(), r, opt); v != vOK {
							errs <- fmt.Errorf("reader %d cart %d line %d: %s %s (revision %d)", g, k, i, v, d, rev)
							return
						}
						if old, loaded := versions.LoadOrStore(r.Version, rev); loaded && old.(int64) != rev {
							errs <- fmt.Errorf("version %q answered for revisions %d and %d", r.Version, old, rev)
							return
						}
						seen = max(seen, rev)
						revsSeen[rev] = true
					}
				}
			}(g)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		t.Logf("readers saw %d revisions in all (of %d each)", spread.Load(), revs)
	})
}

// TestAdvAppendAllocs: carts answered from held ladders into a reused dst
// allocate nothing without MatchOptions.Next, whatever their lines: one
// line, no tier, the top, duplicates, amounts, MatchOptions.Gifts on
// tiers without gifts. Not parallel: AllocsPerRun counts the process.
func TestAdvAppendAllocs(t *testing.T) {
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		noGifts := simplePromotion("ng", 2, 5, 10)
		for i := range noGifts.Tiers {
			noGifts.Tiers[i].Gifts = nil
		}
		amt := advAmountPromotion("am")
		amt.Tiers[2].Gifts = nil
		if _, err := newCache(t, b, Options{}).Refresh(ctx, noGifts, amt); err != nil {
			t.Fatal(err)
		}
		c := newNearCache(t, nearClient(t, b), b.Prefix, Options{NearCache: &NearCacheOptions{MaxStaleness: time.Hour}})
		for _, tc := range []struct {
			name string
			qs   []Query
			opt  MatchOptions
		}{
			{"one line", []Query{QuantityQuery("ng", 5)}, MatchOptions{}},
			{"no tier", []Query{QuantityQuery("ng", 0), QuantityQuery("ng", 1)}, MatchOptions{}},
			{"top and duplicates", []Query{QuantityQuery("ng", 99), QuantityQuery("ng", 99), QuantityQuery("ng", 5)}, MatchOptions{}},
			{"amounts", []Query{AmountQuery("am", decimal.RequireFromString("50.5")), AmountQuery("am", decimal.RequireFromString("12.345"))}, MatchOptions{}},
			{"gifts on tiers without gifts", []Query{QuantityQuery("ng", 5), QuantityQuery("ng", 12)}, MatchOptions{Gifts: true}},
			{"next at the top", []Query{QuantityQuery("ng", 10), QuantityQuery("ng", 50)}, MatchOptions{Next: true}},
		} {
			buf, err := c.AppendMatchCart(ctx, nil, tc.qs, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			hits := c.NearStats().Hits
			var callErr error
			n := testing.AllocsPerRun(50, func() {
				buf, callErr = c.AppendMatchCart(ctx, buf[:0], tc.qs, tc.opt)
			})
			if callErr != nil {
				t.Fatal(callErr)
			}
			if h := c.NearStats().Hits - hits; h < int64(50*len(tc.qs)) {
				t.Fatalf("%s: %d lines from held ladders, want ≥ %d", tc.name, h, 50*len(tc.qs))
			}
			if n != 0 {
				t.Errorf("%s: %.1f allocations per cart into a reused dst, want 0", tc.name, n)
			}
		}
	})
}

// TestFaultAdvAppendWholeCallError: a call that fails whole returns dst
// as it came, its length and its contents (see advWholeCallErrors).
func TestFaultAdvAppendWholeCallError(t *testing.T) {
	t.Parallel()
	advWholeCallErrors(t, func(name string, dst []Result, snap []advSlot) {
		for i := range dst {
			if d := advSlotChanged(dst, snap, i); d != "" {
				t.Errorf("%s: dst's contents: %s", name, d)
			}
		}
	})
}
