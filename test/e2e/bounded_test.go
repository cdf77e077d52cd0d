package e2e_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/score"
)

var hugeValue = decimal.RequireFromString(strings.Repeat("9", 200_000))

// TestMatchRefusesHugeValueFast: a cart value of 200,000 digits (or an
// exponent of a billion) is refused by its size in score/, before any
// arithmetic, printing or round trip, whose cost would grow with the digits.
func TestMatchRefusesHugeValueFast(t *testing.T) {
	b := testredis.Mini(t)
	c, err := cache.New(b.Client, cache.Options{Prefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Refresh(ctx, giftPromo("p", 0)); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		q    cache.Query
		want error
	}{
		{"amount of 200k digits", cache.Query{Promotion: "p", Metric: gradient.Amount, Value: hugeValue}, score.ErrTooLong},
		{"quantity of 200k digits", cache.Query{Promotion: "p", Metric: gradient.Quantity, Value: hugeValue}, score.ErrTooLong},
		{"negative of 200k digits", cache.Query{Promotion: "p", Metric: gradient.Quantity, Value: hugeValue.Neg()}, score.ErrTooLong},
		{"1e999999999", cache.Query{Promotion: "p", Metric: gradient.Quantity, Value: decimal.New(1, 999_999_999)}, score.ErrOutOfRange},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := c.Match(ctx, tc.q, cache.MatchOptions{Gifts: true})
			took := time.Since(start)
			if !errors.Is(err, &cache.ValidationError{Field: "query"}) || !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want ErrBadQuery wrapping %v", err, tc.want)
			}
			if took > 50*time.Millisecond { // generous; BenchmarkMatchRefusesHugeValue measures
				t.Errorf("took %v", took)
			}
			if len(err.Error()) > 300 {
				t.Errorf("error is %d bytes", len(err.Error()))
			}
		})
	}
}

func BenchmarkMatchRefusesHugeValue(b *testing.B) {
	tb := testredis.Mini(b)
	c, err := cache.New(tb.Client, cache.Options{Prefix: tb.Prefix})
	if err != nil {
		b.Fatal(err)
	}
	q := cache.Query{Promotion: "p", Metric: gradient.Amount, Value: hugeValue}
	ctx := context.Background()
	for b.Loop() {
		if _, err := c.Match(ctx, q, cache.MatchOptions{}); !errors.Is(err, score.ErrTooLong) {
			b.Fatal(err)
		}
	}
}
