package cache

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/score"
)

// TestCartGroupEdges prices carts at the edges of the grouped read
// (cartgroup.go) and checks every line against the same query matched
// alone, against gradient.Matcher, and the round trips: duplicate lines,
// lines exactly maxGroupSpan apart (read alone) and one less (grouped),
// scores just under the 2^53 ceiling, dense and sparse ladders, Next at
// and above the top tier, bad lines between grouped ones, and
// promotions never stored or deleted.
func TestCartGroupEdges(t *testing.T) {
	t.Parallel()
	const top = score.MaxExact // the ceiling sentinel's score
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		obs := &countingObserver{}
		c := newCache(t, b, Options{Observer: obs})
		for k, tc := range []struct {
			name string
			// ladder nil: the promotion is never stored; deleted: stored,
			// then deleted.
			ladder  []int64
			deleted bool
			vals    []int64
			// bad lines, interleaved with the valid ones.
			bad []Query
		}{
			{name: "duplicate lines", ladder: []int64{1, 2, 5, 10}, vals: []int64{5, 5, 5, 7, 7, 0, 0, 10, 10}},
			{name: "exactly maxGroupSpan apart", ladder: []int64{1, 20, 40}, vals: []int64{0, maxGroupSpan}},
			{name: "maxGroupSpan-1 apart", ladder: []int64{1, 20, 40}, vals: []int64{0, maxGroupSpan - 1}},
			{name: "a chain split at the span", ladder: []int64{3, 30, 36, 70}, vals: []int64{5, 36, 37, 38, 69, 70, 100, 131, 132}},
			{name: "just under the ceiling", ladder: []int64{top - 40, top - 2}, vals: []int64{top - 1, top - 2, top - 3, top - 33, top - 41, top - 1}},
			{name: "dense ladder", ladder: seq(64), vals: []int64{0, 1, 17, 31, 32, 33, 63, 64, 70}},
			{name: "sparse ladder, lines above its only tier", ladder: []int64{1}, vals: []int64{40, 50, 70, 41}},
			{name: "sparse ladder, lines below its only tier", ladder: []int64{100}, vals: []int64{1, 20, 30, 99}},
			{name: "next at and above the top tier", ladder: []int64{1, 2, 5}, vals: []int64{5, 6, 20, 5, 4}},
			{name: "bad lines between grouped ones", ladder: []int64{1, 2, 5, 10}, vals: []int64{3, 6, 9, 12},
				bad: []Query{
					{Promotion: "same", Metric: gradient.Quantity, Value: decimal.NewFromInt(-1)},
					{Promotion: "has space", Metric: gradient.Quantity, Value: decimal.NewFromInt(4)},
					{Promotion: "same", Metric: gradient.Quantity, Value: decimal.RequireFromString("9007199254740992")},
					{Promotion: "same", Metric: 9, Value: decimal.NewFromInt(4)},
				}},
			{name: "never stored", vals: []int64{1, 2, 3, 3}},
			{name: "deleted", ladder: []int64{1, 2, 5}, deleted: true, vals: []int64{1, 2, 3, 3}},
		} {
			id := "edge-" + strconv.Itoa(k)
			var m *gradient.Matcher
			if tc.ladder != nil {
				p := simplePromotion(id, tc.ladder...)
				p.Revision = 1
				if _, err := c.Refresh(ctx, p); err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				var err error
				if m, err = gradient.NewMatcher(p); err != nil {
					t.Fatal(err)
				}
				if tc.deleted {
					if _, err := c.Delete(ctx, id, 2); err != nil {
						t.Fatal(err)
					}
				}
			}
			var qs []Query
			for i, v := range tc.vals {
				qs = append(qs, QuantityQuery(id, v))
				if i < len(tc.bad) {
					bq := tc.bad[i]
					if bq.Promotion != "has space" {
						bq.Promotion = id // the same promotion as its neighbours
					}
					qs = append(qs, bq)
				}
			}
			for _, opt := range matchOpts {
				before := obs.roundTrips.Load()
				rs, err := c.MatchCart(ctx, qs, opt)
				if err != nil {
					t.Fatalf("%s %+v: %v", tc.name, opt, err)
				}
				rts := obs.roundTrips.Load() - before
				want, gifted, absent := int64(1), false, false
				for i, r := range rs {
					alone, _ := c.Match(ctx, qs[i], opt)
					if d := sameResult(r, alone); d != "" {
						t.Fatalf("%s %+v line %d (%+v): %s", tc.name, opt, i, qs[i], d)
					}
					s, qerr := c.encodeQuery(&qs[i])
					switch {
					case qerr != nil:
						if !errors.Is(r.Err, ErrInvalid) {
							t.Fatalf("%s %+v line %d: %v, want ErrInvalid", tc.name, opt, i, r.Err)
						}
					case m == nil || tc.deleted:
						absent = true
						if !errors.Is(r.Err, ErrNotFound) {
							t.Fatalf("%s %+v line %d: %v, want ErrNotFound", tc.name, opt, i, r.Err)
						}
					default:
						if v, d := verdict(m, s, r, opt); v != vOK {
							t.Fatalf("%s %+v line %d (score %d): %s %s", tc.name, opt, i, s, v, d)
						}
						gifted = gifted || r.Tier != nil && r.Tier.HasGifts
					}
				}
				if absent {
					want++ // lines with nothing stored are re-read with their meta key
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
