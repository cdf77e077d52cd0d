package main

import (
	"net/http"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/warm"
)

// TestPriceMinorDigits: a service started with the zero -minor-digits
// prices a USD promotion written with zero MinorDigits, one started with
// -1 prices a JPY promotion, and a line whose promotion has the other
// currency's digits gets the currency-mismatch problem, not the
// metric-mismatch one.
func TestPriceMinorDigits(t *testing.T) {
	srv := testredis.StartServer(t)
	rc := srv.Client(&redis.Options{})
	reward := gradient.Reward{Kind: gradient.AmountOff, Amount: decimal.NewFromInt(5)}
	promos := []gradient.Promotion{
		{ID: "usd", Metric: gradient.Amount, Tiers: []gradient.Tier{{ID: "t", Threshold: decimal.RequireFromString("49.99"), Reward: reward}}},
		{ID: "yen", Metric: gradient.Amount, MinorDigits: gradient.NoMinorDigits, Tiers: []gradient.Tier{{ID: "t", Threshold: decimal.NewFromInt(5000), Reward: reward}}},
	}
	handler := func(minorDigits int) http.Handler {
		c, err := cache.New(rc, cache.Options{MinorDigits: minorDigits})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := warm.Warm(t.Context(), c, promos, warm.Options{}); err != nil {
			t.Fatal(err)
		}
		return newServer(c, serverOptions{MinorDigits: minorDigits})
	}
	usd, yen := handler(0), handler(gradient.NoMinorDigits)
	tests := []struct {
		name         string
		h            http.Handler
		promo, value string
		wantDiscount string
		wantProblem  string
	}{
		{"usd zero values", usd, "usd", "50.00", "5.00", ""},
		{"yen explicit", yen, "yen", "5000", "5", ""},
		{"yen line on a usd service", usd, "yen", "5000", "0.00", probCurrency},
		{"usd line on a yen service", yen, "usd", "50", "0", probCurrency},
	}
	for _, tc := range tests {
		body := `{"lines": [{"promotion": "` + tc.promo + `", "amount": "` + tc.value + `", "base": "` + tc.value + `"}]}`
		code, out := do(t, tc.h, http.MethodPost, "/v1/cart/price", body)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %v", tc.name, code, out)
		}
		ln := out["lines"].([]any)[0].(map[string]any)
		gotProblem := ""
		if p, ok := ln["problem"].(map[string]any); ok {
			gotProblem, _ = p["type"].(string)
		}
		if ln["discount"] != tc.wantDiscount || gotProblem != tc.wantProblem {
			t.Fatalf("%s: discount %v problem %q (%v); want %s, %q", tc.name, ln["discount"], gotProblem, ln, tc.wantDiscount, tc.wantProblem)
		}
	}
}
