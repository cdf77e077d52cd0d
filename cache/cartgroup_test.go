package cache

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// sameResult reports how got (a cart line) differs from want (the same
// query matched alone), "" when it does not: the grouped read must give
// every line exactly its own read's answer.
func sameResult(got, want Result) string {
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	switch {
	case got.Promotion != want.Promotion || got.Version != want.Version || !got.Shortfall.Equal(want.Shortfall):
		return fmt.Sprintf("promotion/version/shortfall %q %q %s, want %q %q %s", got.Promotion, got.Version, got.Shortfall, want.Promotion, want.Version, want.Shortfall)
	case errText(got.Err) != errText(want.Err):
		return fmt.Sprintf("error %v, want %v", got.Err, want.Err)
	case !reflect.DeepEqual(got.Tier, want.Tier):
		return fmt.Sprintf("tier %+v, want %+v", got.Tier, want.Tier)
	case !reflect.DeepEqual(got.Next, want.Next):
		return fmt.Sprintf("next %+v, want %+v", got.Next, want.Next)
	}
	return ""
}

// TestCartGroupsAgainstOracle prices 150-line carts whose lines share a
// few promotions (so most lines are answered by their promotion's one
// read) and checks every line against gradient.Matcher and against the
// same query matched alone, with each of Next and Gifts, in one round
// trip (two when a hit has gifts).
func TestCartGroupsAgainstOracle(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		obs := &countingObserver{}
		c := newCache(t, b, Options{Observer: obs})
		rng := rand.New(rand.NewSource(7))
		dense := simplePromotion("dense", seq(40)...) // a tier at every item count 1..40
		sparse := simplePromotion("sparse", 1, 2, 4, 8, 16)
		noGifts := simplePromotion("nogifts", 3, 6, 9)
		for i := range noGifts.Tiers {
			noGifts.Tiers[i].Gifts = nil
		}
		promos := []gradient.Promotion{dense, sparse, noGifts,
			randPromotion(rng, "rq", gradient.Quantity, 300), randPromotion(rng, "ra", gradient.Amount, 30)}
		if _, err := c.Refresh(ctx, promos...); err != nil {
			t.Fatal(err)
		}
		matchers := map[string]*gradient.Matcher{}
		for _, p := range promos {
			m, err := gradient.NewMatcher(p)
			if err != nil {
				t.Fatal(err)
			}
			matchers[p.ID] = m
		}
		for _, tc := range []struct {
			name   string
			promos []gradient.Promotion
			maxVal int64 // query scores 0..maxVal-1
			absent bool  // also lines on a promotion never stored
		}{
			{"one dense promotion, values within a group", promos[:1], 45, false},
			{"sparse and dense, near the ladders", promos[:3], 25, false},
			{"values further apart than a group spans", promos[:2], 200, false},
			{"300 random tiers", promos[3:4], 300 * 50, false},
			{"amounts in cents", promos[4:5], 30 * 50, false},
			{"every promotion and an absent one", promos, 120, true},
		} {
			qs := make([]Query, 150)
			var scores []int64
			for i := range qs {
				s := rng.Int63n(tc.maxVal)
				scores = append(scores, s)
				if tc.absent && i%10 == 0 {
					qs[i] = QuantityQuery("absent", s)
					continue
				}
				qs[i] = queryFor(&tc.promos[rng.Intn(len(tc.promos))], s)
			}
			for _, opt := range matchOpts {
				before := obs.roundTrips.Load()
				rs, err := c.MatchCart(ctx, qs, opt)
				if err != nil {
					t.Fatalf("%s %+v: %v", tc.name, opt, err)
				}
				rts := obs.roundTrips.Load() - before
				gifted := false
				for i, r := range rs {
					if qs[i].Promotion == "absent" {
						if !errors.Is(r.Err, ErrNotFound) {
							t.Fatalf("%s %+v line %d: %+v, want ErrNotFound", tc.name, opt, i, r)
						}
						continue
					}
					if v, d := verdict(matchers[qs[i].Promotion], scores[i], r, opt); v != vOK {
						t.Fatalf("%s %+v line %d (%s): %s %s", tc.name, opt, i, qs[i].Promotion, v, d)
					}
					gifted = gifted || r.Tier != nil && r.Tier.HasGifts
					alone, _ := c.Match(ctx, qs[i], opt)
					if d := sameResult(r, alone); d != "" {
						t.Fatalf("%s %+v line %d (%s score %d): %s", tc.name, opt, i, qs[i].Promotion, scores[i], d)
					}
				}
				want := int64(1)
				if tc.absent {
					want++ // an absent promotion's lines are re-read with their meta key
				}
				if opt.Gifts && gifted {
					want++
				}
				if rts != want {
					t.Fatalf("%s %+v: %d round trips, want %d", tc.name, opt, rts, want)
				}
			}
		}
	})
}

// TestCartGroupsTampered plants members behind the cache's back in a
// ladder whose lines are read as one group: records that do not decode,
// another promotion's member, a member of another version. A group whose
// reply does not read as a ladder the cache wrote leaves its lines to be
// re-read alone, so every line still gets exactly its own read's answer.
func TestCartGroupsTampered(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b, Options{})
		other, err := New(b.Client, Options{Prefix: b.Prefix + ":other"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { other.Close() })
		// plant returns the members to add to crowded's key.
		memberAt := func(t *testing.T, cc *Cache, id string, s int64) redis.Z {
			t.Helper()
			zs, err := b.Client.ZRangeByScoreWithScores(ctx, cc.tiersKey(id), &redis.ZRangeBy{Min: strconv.FormatInt(s, 10), Max: strconv.FormatInt(s, 10)}).Result()
			if err != nil || len(zs) != 1 {
				t.Fatalf("member at %d: %v %v", s, zs, err)
			}
			return zs[0]
		}
		for k, tc := range []struct {
			name  string
			plant func(t *testing.T, id string) []redis.Z
			// vals are the lines' item counts, one group (within maxGroupSpan).
			vals []int64
		}{
			{"records that do not decode, between two tiers", func(*testing.T, string) []redis.Z {
				var zs []redis.Z
				for k := 1; k <= 9; k++ {
					zs = append(zs, redis.Z{Score: 8 + float64(k)/10, Member: "planted-" + strconv.Itoa(k)})
				}
				return zs
			}, []int64{3, 9, 10, 11, 12, 12}},
			{"another promotion's member", func(t *testing.T, _ string) []redis.Z {
				if _, err := c.Refresh(ctx, simplePromotion("foreign", 7)); err != nil {
					t.Fatal(err)
				}
				return []redis.Z{memberAt(t, c, "foreign", 7)}
			}, []int64{1, 5, 7, 8, 12}},
			{"a member of another version", func(t *testing.T, id string) []redis.Z {
				p := simplePromotion(id, 1, 2, 7, 10)
				p.Tiers[2].Reward.Percent = p.Tiers[2].Reward.Percent.Add(p.Tiers[2].Reward.Percent)
				if _, err := other.Refresh(ctx, p); err != nil {
					t.Fatal(err)
				}
				return []redis.Z{memberAt(t, other, id, 7)}
			}, []int64{1, 5, 7, 8, 12, 30}},
		} {
			id := "crowded" + strconv.Itoa(k)
			if _, err := c.Refresh(ctx, simplePromotion(id, 1, 2, 5, 10)); err != nil {
				t.Fatal(err)
			}
			if err := b.Client.ZAdd(ctx, c.tiersKey(id), tc.plant(t, id)...).Err(); err != nil {
				t.Fatal(err)
			}
			qs := make([]Query, len(tc.vals))
			for i, v := range tc.vals {
				qs[i] = QuantityQuery(id, v)
			}
			for _, opt := range matchOpts {
				rs, err := c.MatchCart(ctx, qs, opt)
				if err != nil {
					t.Fatal(err)
				}
				corrupt := 0
				for i := range qs {
					alone, _ := c.Match(ctx, qs[i], opt)
					if d := sameResult(rs[i], alone); d != "" {
						t.Fatalf("%s %+v line %d (score %d): %s", tc.name, opt, i, tc.vals[i], d)
					}
					if errors.Is(rs[i].Err, ErrCorrupt) {
						corrupt++
					}
				}
				if r := rs[0]; r.Err != nil && !errors.Is(r.Err, ErrNoTier) || r.Tier == nil && tc.vals[0] >= 1 {
					t.Fatalf("%s %+v: line at %d below the planted members: %+v", tc.name, opt, tc.vals[0], r)
				}
				if tc.name != "a member of another version" || opt.Next {
					if corrupt == 0 {
						t.Fatalf("%s %+v: no line reached the planted member", tc.name, opt)
					}
				}
			}
		}
	})
}

// TestCartGroupsTagClash interleaves in one cart the lines of two
// promotions whose IDs share an ownerTag, the first key of the lines'
// sort: they still group by promotion, one read each (and the highest
// line's next-tier read with Next), every line its own read's answer.
func TestCartGroupsTagClash(t *testing.T) {
	t.Parallel()
	ids := [2]string{"tagclash-632114", "tagclash-1919740"}
	if ownerTag(ids[0]) != ownerTag(ids[1]) {
		t.Fatalf("%q and %q do not share an ownerTag", ids[0], ids[1])
	}
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		obs := &countingObserver{}
		c := newCache(t, b, Options{Observer: obs})
		if _, err := c.Refresh(ctx, simplePromotion(ids[0], 1, 2, 4, 8, 16), simplePromotion(ids[1], 3, 6, 9)); err != nil {
			t.Fatal(err)
		}
		zr := &countCmds{name: "zrange"}
		b.Client.AddHook(zr)
		var qs []Query
		for i := range 24 {
			qs = append(qs, QuantityQuery(ids[i%2], int64(19-i%20)))
		}
		for _, opt := range matchOpts {
			before, cmds0 := obs.roundTrips.Load(), zr.n.Load()
			rs, err := c.MatchCart(ctx, qs, opt)
			if err != nil {
				t.Fatalf("%+v: %v", opt, err)
			}
			rts, cmds := obs.roundTrips.Load()-before, zr.n.Load()-cmds0
			for i, r := range rs {
				alone, _ := c.Match(ctx, qs[i], opt)
				if d := sameResult(r, alone); d != "" {
					t.Fatalf("%+v line %d (%+v): %s", opt, i, qs[i], d)
				}
			}
			want, wantCmds := int64(1), int64(2)
			if opt.Gifts {
				want++
			}
			if opt.Next {
				wantCmds += 2
			}
			if rts != want || cmds != wantCmds {
				t.Fatalf("%+v: %d round trips and %d ZRANGEs, want %d and %d", opt, rts, cmds, want, wantCmds)
			}
		}
	})
}
