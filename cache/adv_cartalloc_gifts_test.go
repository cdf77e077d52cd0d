package cache

import (
	"context"
	"fmt"
	"math/rand"
	"strconv"
	"sync"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// agTiers is the number of tiers of each agWorld promotion: tier i at
// threshold i+1 with one gift, "gift-i", from simplePromotion.
const agTiers = 12

// agWant returns what is wrong with r, the answer with gifts to q, a
// line on a simplePromotion of agTiers tiers.
func agWant(q Query, r Result, gifts bool) string {
	if r.Err != nil || r.Tier == nil {
		return fmt.Sprintf("%s: %+v", q.Promotion, r)
	}
	k := int(min(q.Value.IntPart(), agTiers)) - 1
	if r.Tier.ID != "tier"+strconv.Itoa(k) || !r.Tier.Threshold.Equal(decimal.NewFromInt(int64(k+1))) {
		return fmt.Sprintf("%s at %s: tier %q threshold %s, want tier%d", q.Promotion, q.Value, r.Tier.ID, r.Tier.Threshold, k)
	}
	if !gifts {
		if r.Tier.Gifts != nil {
			return fmt.Sprintf("%s: gifts %v without MatchOptions.Gifts", q.Promotion, r.Tier.Gifts)
		}
		return ""
	}
	want := gradient.Gift{SKU: "gift-" + strconv.Itoa(k), Qty: 1 + k%5, Name: "g" + strconv.Itoa(k)}
	if len(r.Tier.Gifts) != 1 || r.Tier.Gifts[0] != want {
		return fmt.Sprintf("%s at %s: gifts %+v, want [%+v]", q.Promotion, q.Value, r.Tier.Gifts, want)
	}
	return ""
}

// agScribble writes into every part of rs a caller may write to: all of
// it on the Redis path; with a near cache (shared) only the tiers that
// came with their lists, the copies MatchOptions.Gifts and Cache.Gifts
// return (see Result).
func agScribble(rs []Result, shared bool) {
	for i := range rs {
		if t := rs[i].Tier; t != nil && (!shared || t.Gifts != nil) {
			t.ID, t.Threshold, t.HasGifts = "scribbled", decimal.NewFromInt(-7), !t.HasGifts
			for k := range t.Gifts {
				t.Gifts[k] = gradient.Gift{SKU: "scribbled", Qty: -1}
			}
			t.Gifts = append(t.Gifts, gradient.Gift{SKU: "appended"})
		}
		if n := rs[i].Next; n != nil && !shared {
			n.ID = "scribbled"
		}
	}
}

// TestAdvCartAllocGiftsScribbled has goroutines price carts with and
// without gifts on one Cache (the Redis path, and a near cache) by every
// way in (MatchCart, AppendMatchCart, Match, MatchCart then Cache.Gifts),
// check each answer, then write into every tier and gift list it may
// write to (agScribble), while the others read: no write may reach another answer, and
// Cache.Gifts must leave the tiers it was handed as they were.
func TestAdvCartAllocGiftsScribbled(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		ids := []string{"ag-a", "ag-b", "ag-c"}
		th := make([]int64, agTiers)
		for i := range th {
			th[i] = int64(i + 1)
		}
		for _, tc := range []struct {
			name string
			near bool
		}{{"redis", false}, {"near", true}} {
			t.Run(tc.name, func(t *testing.T) {
				var c *Cache
				if tc.near {
					c = newNearCache(t, nearClient(t, b), b.Prefix+"-n", Options{})
				} else {
					c = newCacheOn(t, b.Client, b.Prefix+"-r")
				}
				for _, id := range ids {
					if _, err := c.Refresh(ctx, simplePromotion(id, th...)); err != nil {
						t.Fatal(err)
					}
				}
				const workers, rounds = 8, 25
				var wg sync.WaitGroup
				errs := make(chan string, workers)
				for g := range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						rng := rand.New(rand.NewSource(int64(g)*131 + 7))
						var buf []Result
						fail := func(how string, d string) { errs <- fmt.Sprintf("worker %d %s: %s", g, how, d) }
						for round := range rounds {
							n := 1 + rng.Intn(40)
							if round%5 == 0 {
								n = 1
							}
							qs := make([]Query, n)
							same := rng.Intn(3) == 0 // every line on one promotion and value
							for i := range qs {
								qs[i] = QuantityQuery(ids[rng.Intn(len(ids))], 1+rng.Int63n(agTiers+3))
								if same && i > 0 {
									qs[i] = qs[0]
								}
							}
							how := (g + round) % 5
							gifts := how != 4
							opt := MatchOptions{Gifts: gifts, Next: rng.Intn(2) == 0}
							var rs []Result
							var err error
							switch how {
							case 0, 4:
								rs, err = c.MatchCart(ctx, qs, opt)
							case 1:
								buf, err = c.AppendMatchCart(ctx, buf[:0], qs, opt)
								rs = buf
							case 2:
								rs = make([]Result, len(qs))
								for i := range qs {
									if rs[i], err = c.Match(ctx, qs[i], opt); err != nil {
										break
									}
								}
							case 3:
								opt.Gifts = false
								if rs, err = c.MatchCart(ctx, qs, opt); err != nil {
									break
								}
								old := make([]*TierHit, len(rs))
								for i := range rs {
									old[i] = rs[i].Tier
								}
								if err = c.Gifts(ctx, rs); err != nil {
									break
								}
								for i, o := range old {
									if o != nil && o.Gifts != nil {
										fail("Gifts", fmt.Sprintf("line %d: the tier handed in took a list in place", i))
										return
									}
								}
							}
							if err != nil {
								fail("call", err.Error())
								return
							}
							for i := range qs {
								if d := agWant(qs[i], rs[i], gifts); d != "" {
									fail(fmt.Sprintf("how %d round %d line %d", how, round, i), d)
									return
								}
							}
							agScribble(rs, tc.near)
						}
					}()
				}
				wg.Wait()
				close(errs)
				for e := range errs {
					t.Error(e)
				}
			})
		}
	})
}
