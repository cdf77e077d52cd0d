package cache

import (
	"context"
	"errors"
	"math/rand"
	"strconv"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// TestVersionIsWhatRefreshStores: Version gives the hash Refresh reports
// and Info reads back, for any prefix, and refuses what Refresh refuses
// with the same error.
func TestVersionIsWhatRefreshStores(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b, Options{})
		rng := rand.New(rand.NewSource(11))
		for i := 0; i < 6; i++ {
			p := randPromotion(rng, "ver"+strconv.Itoa(i), gradient.Metric(1+i%2), 1+rng.Intn(30))
			v, err := Version(&p, Options{})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := c.Refresh(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			in, err := c.Info(ctx, p.ID)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Promotions[0].Version != v || in.Version != v {
				t.Fatalf("%s: Version %s, Refresh stored %s, Info reads %s", p.ID, v, rep.Promotions[0].Version, in.Version)
			}
		}
		cases := []struct {
			name  string
			p     gradient.Promotion
			opts  Options
			match error
		}{
			{"no tiers", gradient.Promotion{ID: "empty", Metric: gradient.Quantity}, Options{}, gradient.ErrInvalid},
			{"bad id", simplePromotion("a b", 1), Options{}, gradient.ErrInvalid},
			{"record over the limit", simplePromotion("small", 1), Options{MaxRecordBytes: 16}, gradient.ErrInvalid},
			{"sub-cent threshold", gradient.Promotion{ID: "cents", Metric: gradient.Amount, MinorDigits: 2, Tiers: []gradient.Tier{{
				ID: "t", Threshold: decimal.RequireFromString("1.001"), Reward: gradient.Reward{Kind: gradient.AmountOff, Amount: decimal.NewFromInt(1)}}}}, Options{}, gradient.ErrInvalid},
			{"bad options", simplePromotion("ok", 1), Options{MaxRecordBytes: -1}, &ValidationError{Field: "options"}},
		}
		for _, tc := range cases {
			_, verr := Version(&tc.p, tc.opts)
			if !errors.Is(verr, tc.match) {
				t.Fatalf("%s: Version error %v, want %v", tc.name, verr, tc.match)
			}
			if errors.Is(verr, &ValidationError{Field: "options"}) {
				continue
			}
			opts := tc.opts
			opts.Prefix = b.Prefix
			rc, err := New(b.Client, opts)
			if err != nil {
				t.Fatal(err)
			}
			if _, rerr := rc.Refresh(ctx, tc.p); rerr == nil || rerr.Error() != verr.Error() {
				t.Fatalf("%s: Refresh error %v, Version error %v", tc.name, rerr, verr)
			}
		}
	})
}
