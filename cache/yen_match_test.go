package cache

import (
	"context"
	"errors"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// TestYenMatchBelowThreshold: a cache of a currency without minor units
// (gradient.NoMinorDigits) encodes a query in whole units, so a cart just
// under a tier does not reach it. 0 digits must not be read again as
// "the default, 2" on the way to the score.
func TestYenMatchBelowThreshold(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b, Options{MinorDigits: gradient.NoMinorDigits})
		reward := gradient.Reward{Kind: gradient.AmountOff, Amount: decimal.NewFromInt(500)}
		yen := gradient.Promotion{ID: "yen", Metric: gradient.Amount, MinorDigits: gradient.NoMinorDigits, Tiers: []gradient.Tier{
			{ID: "low", Threshold: decimal.NewFromInt(1000), Reward: reward},
			{ID: "high", Threshold: decimal.NewFromInt(5000), Reward: reward},
		}}
		if _, err := c.Refresh(ctx, yen); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			value string
			tier  string // "" for ErrNoTier
		}{{"999", ""}, {"999.9", ""}, {"1000", "low"}, {"4999", "low"}, {"4999.99", "low"}, {"5000", "high"}} {
			r, err := c.Match(ctx, AmountQuery("yen", decimal.RequireFromString(tc.value)), MatchOptions{})
			switch {
			case tc.tier == "" && !errors.Is(err, ErrNoTier):
				t.Errorf("%s yen: %+v, %v; want ErrNoTier", tc.value, r.Tier, err)
			case tc.tier != "" && (err != nil || r.Tier == nil || r.Tier.ID != tc.tier):
				t.Errorf("%s yen: %+v, %v; want tier %s", tc.value, r.Tier, err, tc.tier)
			}
		}
	})
}

// TestMinorDigitsRange: MinorDigits outside -1..9 is refused, in a
// promotion (a *gradient.ValidationError on minor_digits, nothing
// written) and in Options (a *ValidationError on options).
func TestMinorDigitsRange(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b, Options{})
		for _, d := range []int{-2, 10, -100} {
			if _, err := New(b.Client, Options{Prefix: b.Prefix, MinorDigits: d}); !errors.Is(err, &ValidationError{Field: "options"}) {
				t.Errorf("Options.MinorDigits %d: %v, want a *ValidationError on options", d, err)
			}
			p := unorderedPromo("d", 0, 0)
			p.Metric, p.MinorDigits = gradient.Amount, d
			var ve *gradient.ValidationError
			if _, err := c.Refresh(ctx, p); !errors.As(err, &ve) || ve.Field != "minor_digits" {
				t.Errorf("Promotion.MinorDigits %d: %v, want a *gradient.ValidationError on minor_digits", d, err)
			}
			if _, err := c.Info(ctx, "d"); !errors.Is(err, ErrNotFound) {
				t.Errorf("after a refused Refresh: %v, want ErrNotFound", err)
			}
		}
		for _, d := range []int{0, -1, 1, 9} {
			if gradient.Digits(d) != map[int]int{0: 2, -1: 0, 1: 1, 9: 9}[d] {
				t.Errorf("Digits(%d) = %d", d, gradient.Digits(d))
			}
		}
	})
}
