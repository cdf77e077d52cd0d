package score

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/shopspring/decimal"
)

// slowFloor and slowAmount are the decimal-only encodings AmountFloor and
// Amount used before their int64 fast path; the fast path must agree with
// them on every input, result and error class alike.
func slowFloor(d decimal.Decimal, digits int) (int64, error) {
	scaled := d.Shift(int32(digits)).Floor()
	if scaled.GreaterThan(maxExactDec) {
		return 0, ErrOutOfRange
	}
	return scaled.IntPart(), nil
}

func slowAmount(d decimal.Decimal, digits int) (int64, error) {
	scaled := d.Shift(int32(digits))
	if !scaled.Equal(scaled.Truncate(0)) {
		return 0, ErrTooPrecise
	}
	if scaled.GreaterThan(maxExactDec) {
		return 0, ErrOutOfRange
	}
	return scaled.IntPart(), nil
}

// fastCases are the edges: exact 2^53 boundaries at every digit count,
// coefficients of 18, 19 and more digits, exponents far out either way.
func fastCases() []decimal.Decimal {
	var out []decimal.Decimal
	add := func(s string) { out = append(out, decimal.RequireFromString(s)) }
	for _, s := range []string{
		"0", "0.00", "0e-40", "0e40", "1", "0.01", "0.001", "0.009", "0.019", "99.99", "99.999", "100",
		"1e-18", "1e-19", "1e-30", "9e-30", "1e9", "1e15", "1e16", "1e18", "1e19", "1e40",
		"999999999999999999", "1000000000000000000", "9223372036854775807", "9223372036854775808",
		"99999999999999999999999", "123456789012345678.9", "0.123456789012345678",
		"1234567890123456789012345678901234567890",
	} {
		add(s)
	}
	for digits := 0; digits <= MaxMinorDigits; digits++ {
		for _, delta := range []int64{-1, 0, 1} {
			m := MaxExact + delta
			out = append(out, decimal.New(m, -int32(digits)))            // exactly 2^53±1 minor units
			out = append(out, decimal.New(m*10+5, -int32(digits)-1))     // half a unit above
			out = append(out, decimal.New(m*1000+999, -int32(digits)-3)) // just below the next unit
			out = append(out, decimal.NewFromBigInt(new(big.Int).Mul(big.NewInt(m), big.NewInt(1e9)), -int32(digits)-9))
		}
	}
	return out
}

func TestScoreFastPathAgreesWithDecimal(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	values := fastCases()
	for i := 0; i < 20000; i++ {
		var coef int64
		switch rng.IntN(4) {
		case 0:
			coef = rng.Int64N(1000)
		case 1:
			coef = rng.Int64N(MaxExact * 2)
		case 2:
			coef = rng.Int64()
		default:
			coef = rng.Int64N(1e18)
		}
		exp := int32(rng.IntN(50) - 30)
		values = append(values, decimal.New(coef, exp))
		if i%10 == 0 { // coefficients past int64
			big := new(big.Int).Mul(big.NewInt(coef), big.NewInt(rng.Int64N(1e12)+1))
			values = append(values, decimal.NewFromBigInt(big, exp))
		}
		if i%10 == 1 { // parsed, as a cart service would receive them
			values = append(values, decimal.RequireFromString(strconv.FormatFloat(rng.Float64()*math.Pow(10, float64(rng.IntN(18))), 'f', rng.IntN(8), 64)))
		}
	}
	for _, d := range values {
		for digits := 0; digits <= MaxMinorDigits; digits++ {
			want, wantErr := slowFloor(d, digits)
			got, err := AmountFloor(d, digits)
			if got != want || !errors.Is(err, wantErr) || (err == nil) != (wantErr == nil) {
				t.Fatalf("AmountFloor(%s, %d) = %d, %v; decimal path %d, %v", d, digits, got, err, want, wantErr)
			}
			want, wantErr = slowAmount(d, digits)
			got, err = Amount(d, digits)
			if got != want || !errors.Is(err, wantErr) || (err == nil) != (wantErr == nil) {
				t.Fatalf("Amount(%s, %d) = %d, %v; decimal path %d, %v", d, digits, got, err, want, wantErr)
			}
		}
	}
}

func TestScoreFastPathAllocatesNothing(t *testing.T) {
	for _, c := range []struct {
		d      decimal.Decimal
		digits int
	}{
		{decimal.New(9999, -2), 2},
		{decimal.New(99999, -3), 2},
		{decimal.NewFromInt(42), 0},
		{decimal.RequireFromString("1234.5678"), 3},
	} {
		n := testing.AllocsPerRun(100, func() {
			if _, err := AmountFloor(c.d, c.digits); err != nil {
				t.Fatal(err)
			}
		})
		if n != 0 {
			t.Errorf("AmountFloor(%s, %d): %v allocs, want 0", c.d, c.digits, n)
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := Amount(decimal.New(9999, -2), 2); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Amount(99.99, 2): %v allocs, want 0", n)
	}
}

func BenchmarkAmountFloor(b *testing.B) {
	for _, c := range []struct {
		name   string
		d      decimal.Decimal
		digits int
	}{
		{"cents", decimal.New(9999, -2), 2},
		{"subcent", decimal.New(99999, -3), 2},
		{"big", decimal.RequireFromString("12345678901234567890.5"), 2},
	} {
		b.Run("value="+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := AmountFloor(c.d, c.digits); err != nil && !errors.Is(err, ErrOutOfRange) {
					b.Fatal(err)
				}
			}
		})
	}
}
