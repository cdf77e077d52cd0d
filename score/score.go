package score

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/internal/text"
)

// MaxExact is the largest magnitude a Redis score (an IEEE-754 double) holds
// with every smaller integer still representable: 2^53.
const MaxExact int64 = 1 << 53

// MaxMinorDigits bounds the minor-unit digits of a currency. Real currencies
// use 0 (JPY), 2 (USD, CNY) or 3 (KWD); 9 leaves room for crypto-style units
// while keeping 10^digits inside int64.
const MaxMinorDigits = 9

// Check returns s when |s| ≤ 2^53 and ErrOutOfRange otherwise. Every encoder
// in this package funnels through it, so nothing that leaves score/ can lose
// precision when Redis stores it as a double.
func Check(s int64) (int64, error) {
	if s > MaxExact || s < -MaxExact {
		return 0, fmt.Errorf("%w: %d", ErrOutOfRange, s)
	}
	return s, nil
}

// Count encodes an item count as a score.
func Count(n int64) (int64, error) {
	if n < 0 {
		return 0, fmt.Errorf("%w: count %d", ErrNegative, n)
	}
	return Check(n)
}

func checkDigits(minorDigits int) error {
	if minorDigits < 0 || minorDigits > MaxMinorDigits {
		return fmt.Errorf("%w: %d (allowed 0..%d)", ErrMinorDigits, minorDigits, MaxMinorDigits)
	}
	return nil
}

var maxExactDec = decimal.NewFromInt(MaxExact)

// Amount encodes a money amount as integer minor units (cents for
// minorDigits=2). It is exact: an amount with more fractional digits than
// minorDigits is refused with ErrTooPrecise, never rounded, because a
// threshold silently moved by a rounding is a wrong promotion.
func Amount(d decimal.Decimal, minorDigits int) (int64, error) {
	if err := checkDecimalArgs(d, minorDigits); err != nil {
		return 0, err
	}
	if s, ok := scaleFast(d, minorDigits, true); ok {
		return s, nil
	}
	// Values far out of range are refused by size alone, so no
	// arithmetic ever runs on an exponent like 1e999999999. A large value
	// with a fraction goes on, so ErrTooPrecise is reported as before;
	// its exponent is then above -MaxDigits.
	switch m := magnitude(d, minorDigits); {
	case m > maxExactDigits && int64(d.Exponent())+int64(minorDigits) >= 0:
		return 0, fmt.Errorf("%w: %s is beyond 2^53 minor units", ErrOutOfRange, show(d))
	case m <= 0: // 0 < |d| < one minor unit
		return 0, fmt.Errorf("%w: %s is below one minor unit of %d digits", ErrTooPrecise, show(d), minorDigits)
	}
	scaled := d.Shift(int32(minorDigits))
	if !scaled.Equal(scaled.Truncate(0)) {
		return 0, fmt.Errorf("%w: %s has %d fractional digits, currency allows %d", ErrTooPrecise, d.String(), fracDigits(d), minorDigits)
	}
	if scaled.GreaterThan(maxExactDec) {
		return 0, fmt.Errorf("%w: %s is %s minor units, beyond 2^53", ErrOutOfRange, d.String(), scaled.String())
	}
	return scaled.IntPart(), nil
}

// maxExactDigits is the digit count of 2^53 (9007199254740992): a value
// of more digits is beyond it.
const maxExactDigits = 16

// checkDecimalArgs runs the checks every decimal encoder starts with, in
// the order that keeps refusals cheap: the size first.
func checkDecimalArgs(d decimal.Decimal, minorDigits int) error {
	if err := checkDigits(minorDigits); err != nil {
		return err
	}
	if err := CheckDecimal(d); err != nil {
		return err
	}
	if d.Sign() < 0 {
		return fmt.Errorf("%w: amount %s", ErrNegative, show(d))
	}
	return nil
}

// fracDigits counts the significant fractional digits of d.
func fracDigits(d decimal.Decimal) int {
	str := d.String() // String drops trailing zeros
	if i := strings.IndexByte(str, '.'); i >= 0 {
		return len(str) - i - 1
	}
	return 0
}

// AmountFloor encodes a cart-side value for a query: it floors to minor
// units instead of refusing extra digits. Flooring is exact for the question
// "largest threshold ≤ value": a threshold t (an integer in minor units)
// satisfies t ≤ v if and only if t ≤ floor(v).
func AmountFloor(d decimal.Decimal, minorDigits int) (int64, error) {
	if err := checkDecimalArgs(d, minorDigits); err != nil {
		return 0, err
	}
	if s, ok := scaleFast(d, minorDigits, false); ok {
		return s, nil
	}
	switch m := magnitude(d, minorDigits); {
	case m > maxExactDigits:
		return 0, fmt.Errorf("%w: %s is beyond 2^53 minor units", ErrOutOfRange, show(d))
	case m <= 0:
		return 0, nil // below one minor unit floors to 0
	}
	scaled := d.Shift(int32(minorDigits)).Floor()
	if scaled.GreaterThan(maxExactDec) {
		return 0, fmt.Errorf("%w: %s is %s minor units, beyond 2^53", ErrOutOfRange, d.String(), scaled.String())
	}
	return scaled.IntPart(), nil
}

// pow10 holds 10^0 .. 10^18, every power of ten an int64 holds.
var pow10 = func() (t [19]int64) {
	t[0] = 1
	for i := 1; i < len(t); i++ {
		t[i] = t[i-1] * 10
	}
	return t
}()

// scaleFast computes d × 10^minorDigits in int64 arithmetic when d's
// coefficient fits comfortably (at most 18 digits, which NumDigits tells
// without allocating), floored, or only when exact if exact is set. ok is
// false whenever the answer is not a plain in-range success (too precise,
// beyond 2^53, a coefficient too long): the decimal path then decides and
// words the error, so both paths agree on every input. d must be ≥ 0 and
// minorDigits checked.
func scaleFast(d decimal.Decimal, minorDigits int, exact bool) (int64, bool) {
	if d.NumDigits() > 18 {
		return 0, false
	}
	coef := d.CoefficientInt64() // 0 ≤ coef < 10^18
	e := int64(d.Exponent()) + int64(minorDigits)
	switch {
	case coef == 0:
		return 0, true
	case e >= int64(len(pow10)):
		return 0, false // ≥ 10^19 > 2^53
	case e >= 0:
		p := pow10[e]
		if coef > MaxExact/p {
			return 0, false
		}
		return coef * p, true
	case -e >= int64(len(pow10)):
		if exact {
			return 0, false // fractional digits remain
		}
		return 0, true // coef < 10^18 ≤ 10^-e
	}
	p := pow10[-e]
	if exact && coef%p != 0 {
		return 0, false
	}
	s := coef / p
	if s > MaxExact {
		return 0, false
	}
	return s, true
}

// ParseAmount parses a decimal string exactly (never through float64)
// with ParseDecimal, so an over-long string is refused before it is read,
// and encodes it with Amount.
func ParseAmount(s string, minorDigits int) (int64, error) {
	d, err := ParseDecimal(s)
	if err != nil {
		return 0, err
	}
	return Amount(d, minorDigits)
}

// MinorToAmount turns integer minor units back into a decimal amount.
func MinorToAmount(minor int64, minorDigits int) decimal.Decimal {
	return decimal.New(minor, -int32(minorDigits))
}

// Bounds for ZRANGE BYSCORE and ZCOUNT.
const (
	NegInf = "-inf"
	PosInf = "+inf"
)

// Inclusive formats s as an inclusive range bound.
func Inclusive(s int64) string { return strconv.FormatInt(s, 10) }

// Exclusive formats s as an exclusive range bound: "(s".
func Exclusive(s int64) string { return "(" + strconv.FormatInt(s, 10) }

// ParseFloat converts a score read back from Redis (go-redis returns
// float64) to int64, refusing anything that is not an exact integer within
// ±2^53 (NaN, ±Inf, fractions, and magnitudes where doubles skip integers).
func ParseFloat(f float64) (int64, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%w: %v", ErrNotInteger, f)
	}
	if f != math.Trunc(f) {
		return 0, fmt.Errorf("%w: %v", ErrNotInteger, f)
	}
	if f > float64(MaxExact) || f < -float64(MaxExact) {
		return 0, fmt.Errorf("%w: %v", ErrOutOfRange, f)
	}
	return int64(f), nil
}

// ParseString converts a score as Redis prints it ("42", "4.2e1",
// "-inf") to int64 under the same rules as ParseFloat. Hex forms, which
// real Redis accepts on input, are refused: the codec never writes them.
func ParseString(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if len(t) > MaxNumberLen {
		return 0, fmt.Errorf("%w: score %s is longer than %d characters", ErrTooLong, text.Quote(t), MaxNumberLen)
	}
	if t == "" || strings.ContainsAny(t, "xXpP_") {
		return 0, fmt.Errorf("%w: score %q", ErrMalformed, s)
	}
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		return Check(n)
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil && !math.IsInf(f, 0) {
		return 0, fmt.Errorf("%w: score %q", ErrMalformed, s)
	}
	return ParseFloat(f)
}

// Parse accepts what a Redis client hands back for a score: float64,
// string, []byte, or an integer type.
func Parse(v any) (int64, error) {
	switch x := v.(type) {
	case float64:
		return ParseFloat(x)
	case string:
		return ParseString(x)
	case []byte:
		return ParseString(string(x))
	case int64:
		return Check(x)
	case int:
		return Check(int64(x))
	default:
		return 0, fmt.Errorf("%w: unsupported score type %T", ErrMalformed, v)
	}
}
