package cache

import (
	"context"
	"errors"
	"math/rand"
	"strconv"
	"testing"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/soak"
	"github.com/tierset/tierset/internal/testredis"
)

var errorsIs = errors.Is

// TestMatchAgainstOracle warms random promotions (3 to 3000 tiers, both
// metrics) and checks boundary and random queries, single and as carts,
// with and without Next, against gradient.Matcher.
func TestMatchAgainstOracle(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b, Options{})
		rng := rand.New(rand.NewSource(42))
		sizes := []int{1, 3, 30, 300, 3000}
		if !b.Real() {
			// miniredis sorts a whole set on every range query: the
			// 3000-tier promotions run on real Redis.
			sizes = soak.Pick(sizes, sizes[:4])
		}
		var promos []gradient.Promotion
		for i, n := range sizes {
			for _, metric := range []gradient.Metric{gradient.Quantity, gradient.Amount} {
				promos = append(promos, randPromotion(rng, "p"+strconv.Itoa(i)+"-"+metric.String(), metric, n))
			}
		}
		rep, err := c.Refresh(ctx, promos...)
		if err != nil {
			t.Fatalf("Refresh: %v", err)
		}
		if rep.Added != len(promos) {
			t.Fatalf("report %+v", rep)
		}
		for pi := range promos {
			p := &promos[pi]
			m, err := gradient.NewMatcher(*p)
			if err != nil {
				t.Fatal(err)
			}
			vals := boundaryValues(m, rng, 20)
			for _, next := range []bool{false, true} {
				opt := MatchOptions{Next: next}
				qs := make([]Query, len(vals))
				for k, s := range vals {
					qs[k] = queryFor(p, s)
					r, err := c.Match(ctx, qs[k], opt)
					if err != nil && !errors.Is(err, ErrNoTier) {
						t.Fatalf("%s score %d: %v", p.ID, s, err)
					}
					checkAgainstOracle(t, m, s, r, next)
					if r.Version == "" {
						t.Fatalf("no version")
					}
				}
				rs, err := c.MatchCart(ctx, qs, opt)
				if err != nil {
					t.Fatalf("MatchCart: %v", err)
				}
				for k, s := range vals {
					checkAgainstOracle(t, m, s, rs[k], next)
				}
			}
		}
	})
}
