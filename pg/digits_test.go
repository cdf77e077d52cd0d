package pg

import (
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/gradient"
)

// TestRulesMinorDigits: the minor_digits column keeps the digit count
// itself (2 for a promotion saved with MinorDigits 0, 0 for
// NoMinorDigits), as the first schema defined it, and Load reads it back
// into the MinorDigits convention: a row holding 0 is NoMinorDigits.
func TestRulesMinorDigits(t *testing.T) {
	pool, r := testRules(t)
	ctx := testCtx(t, 30*time.Second)
	tier := func(th string) []gradient.Tier {
		return []gradient.Tier{{ID: "t", Threshold: decimal.RequireFromString(th),
			Reward: gradient.Reward{Kind: gradient.AmountOff, Amount: decimal.NewFromInt(1)}}}
	}
	tests := []struct {
		id, threshold    string
		minorDigits      int
		wantColumn, want int
	}{
		{"usd", "49.99", 0, 2, 2},
		{"yen", "5000", gradient.NoMinorDigits, 0, gradient.NoMinorDigits},
		{"kwd", "1.234", 3, 3, 3},
	}
	for _, tc := range tests {
		saveAll(t, pool, r, gradient.Promotion{ID: tc.id, Metric: gradient.Amount, MinorDigits: tc.minorDigits, Tiers: tier(tc.threshold)})
	}
	for _, tc := range tests {
		var column int
		if err := pool.QueryRow(ctx, `SELECT minor_digits FROM `+r.schema+`.promotions WHERE id = $1`, tc.id).Scan(&column); err != nil {
			t.Fatal(err)
		}
		p, found, err := r.LoadOne(ctx, tc.id)
		if err != nil || !found {
			t.Fatalf("%s: LoadOne %v, %v", tc.id, found, err)
		}
		if column != tc.wantColumn || p.MinorDigits != tc.want {
			t.Fatalf("%s: column %d, MinorDigits %d; want %d, %d", tc.id, column, p.MinorDigits, tc.wantColumn, tc.want)
		}
	}
}
