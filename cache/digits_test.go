package cache

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// TestMinorDigitsZeroValue: MinorDigits reads the same in a Promotion and
// in Options (0 is two digits, NoMinorDigits none), so a USD promotion and
// a Cache both written with zero values answer amount queries; a mismatch
// is ErrDigitsMismatch naming both counts, never the metric error; and
// Redis keeps the digit count itself, as every earlier release wrote and reads it.
func TestMinorDigitsZeroValue(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		usdCache := newCache(t, b, Options{})
		yenCache := newCache(t, b, Options{MinorDigits: gradient.NoMinorDigits})
		reward := gradient.Reward{Kind: gradient.AmountOff, Amount: decimal.NewFromInt(5)}
		usd := gradient.Promotion{ID: "usd", Metric: gradient.Amount, Tiers: []gradient.Tier{
			{ID: "t", Threshold: decimal.RequireFromString("49.99"), Reward: reward},
		}}
		yen := gradient.Promotion{ID: "yen", Metric: gradient.Amount, MinorDigits: gradient.NoMinorDigits, Tiers: []gradient.Tier{
			{ID: "t", Threshold: decimal.NewFromInt(5000), Reward: reward},
		}}
		if _, err := usdCache.Refresh(ctx, usd, yen); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name    string
			c       *Cache
			q       Query
			want    error
			wantMsg string
		}{
			{"usd zero values", usdCache, AmountQuery("usd", decimal.RequireFromString("49.99")), nil, ""},
			{"yen explicit", yenCache, AmountQuery("yen", decimal.NewFromInt(5000)), nil, ""},
			{"yen cache on usd promotion", yenCache, AmountQuery("usd", decimal.NewFromInt(50)), ErrDigitsMismatch,
				`promotion "usd" stores amounts with 2 minor digits, this Cache encodes queries with 0 (Options.MinorDigits)`},
			{"usd cache on yen promotion", usdCache, AmountQuery("yen", decimal.NewFromInt(5000)), ErrDigitsMismatch,
				`promotion "yen" stores amounts with 0 minor digits, this Cache encodes queries with 2 (Options.MinorDigits)`},
		}
		for _, tc := range tests {
			r, err := tc.c.Match(ctx, tc.q, MatchOptions{})
			switch {
			case tc.want == nil && (err != nil || r.Tier == nil || r.Tier.ID != "t"):
				t.Fatalf("%s: %+v, %v; want tier t", tc.name, r.Tier, err)
			case tc.want != nil && (!errors.Is(err, tc.want) || errors.Is(err, ErrMetricMismatch)):
				t.Fatalf("%s: err %v, want %v and not ErrMetricMismatch", tc.name, err, tc.want)
			case tc.want != nil && !strings.Contains(err.Error(), tc.wantMsg):
				t.Fatalf("%s: err %q, want it to contain %q", tc.name, err, tc.wantMsg)
			}
		}
		// The stored form is the count, as every earlier release wrote it: "2" and "0".
		for id, want := range map[string]string{"usd": "2", "yen": "0"} {
			got, err := b.Client.HGet(ctx, usdCache.metaKey(id), metaDigits).Result()
			if err != nil || got != want {
				t.Fatalf("%s meta digits %q, %v; want %q", id, got, err, want)
			}
		}
		for id, want := range map[string]int{"usd": 2, "yen": gradient.NoMinorDigits} {
			in, err := usdCache.Info(ctx, id)
			if err != nil || in.MinorDigits != want {
				t.Fatalf("%s Info.MinorDigits %d, %v; want %d", id, in.MinorDigits, err, want)
			}
		}
	})
}

// TestMinorDigitsSameVersion: a promotion with MinorDigits 0 and the same
// one with 2 are one content (one version), so writers that spell the
// default either way, or an earlier release that had to spell it, never take
// turns replacing each other's version.
func TestMinorDigitsSameVersion(t *testing.T) {
	t.Parallel()
	p := simplePromotion("v", 1, 2)
	p.MinorDigits = 0
	zero, err := Version(&p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.MinorDigits = 2
	two, err := Version(&p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.MinorDigits = gradient.NoMinorDigits
	none, err := Version(&p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if zero != two || zero == none {
		t.Fatalf("versions: 0 → %s, 2 → %s, none → %s; want 0 and 2 equal, none different", zero, two, none)
	}
}
