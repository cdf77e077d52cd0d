package cache

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/shopspring/decimal"
)

// The fast path must give exactly what decimal.NewFromString gives, and
// must step aside for everything it does not handle.
func TestParsePlainDecimalAgreesWithNewFromString(t *testing.T) {
	t.Parallel()
	cases := []string{"0", "10", "99.99", "-1.5", "0.001", "100.00", "123456789012345678", "1.234567890123456", "007.50"}
	rng := rand.New(rand.NewPCG(9, 9))
	for range 5000 {
		intPart := strconv.FormatInt(rng.Int64N(1_000_000_000), 10)
		if rng.IntN(2) == 0 {
			intPart += "." + strconv.FormatInt(rng.Int64N(100_000), 10)
		}
		if rng.IntN(5) == 0 {
			intPart = "-" + intPart
		}
		cases = append(cases, intPart)
	}
	for _, s := range cases {
		got, ok := parsePlainDecimal(s)
		if !ok {
			t.Fatalf("%q refused", s)
		}
		want := decimal.RequireFromString(s)
		if !got.Equal(want) || got.Exponent() != want.Exponent() || got.String() != want.String() {
			t.Fatalf("%q: fast %s (exp %d), NewFromString %s (exp %d)", s, got, got.Exponent(), want, want.Exponent())
		}
	}
	for _, s := range []string{"", "-", ".", "1.", ".5", "1e3", "1.2.3", "--1", "1-", "abc", strings.Repeat("9", 19), "+1"} {
		if _, ok := parsePlainDecimal(s); ok {
			t.Errorf("%q accepted by the fast path", s)
		}
	}
}
