package score

import (
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"unsafe"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/internal/text"
)

// MaxNumberLen bounds the characters of a number given as text (sign,
// digits, point, exponent): far beyond any real amount, short enough that
// parsing and the error that quotes it stay cheap.
const MaxNumberLen = 40

// MaxDigits bounds the significant digits of a decimal the encoders
// accept. Every exact score has at most 16 digits; the slack admits
// trailing zeros and fractional digits that flooring drops.
const MaxDigits = 64

// maxCoefWords is the 64-bit words a coefficient of at most MaxDigits
// digits fits in (10^64 < 2^256): one more and it certainly has too many.
const maxCoefWords = 4

// ParseDecimal parses a decimal string exactly, refusing a string longer
// than MaxNumberLen (after trimming spaces) with ErrTooLong before reading
// it, and anything shopspring/decimal does not parse with ErrMalformed.
// Errors quote at most a short prefix of s.
func ParseDecimal(s string) (decimal.Decimal, error) {
	t := strings.TrimSpace(s)
	if len(t) > MaxNumberLen {
		return decimal.Decimal{}, fmt.Errorf("%w: %s is longer than %d characters", ErrTooLong, text.Quote(t), MaxNumberLen)
	}
	d, err := decimal.NewFromString(t)
	if err != nil {
		return decimal.Decimal{}, fmt.Errorf("%w: %s", ErrMalformed, text.Quote(s))
	}
	return d, nil
}

// CheckDecimal refuses a decimal whose coefficient has more than
// MaxDigits digits with ErrTooLong. It reads the coefficient's size, never
// its digits, so a caller's 200,000-digit value costs nothing to refuse;
// every decimal encoder calls it before any arithmetic.
func CheckDecimal(d decimal.Decimal) error {
	if w := coefWords(d); w > maxCoefWords || (w > 1 && d.NumDigits() > MaxDigits) {
		return fmt.Errorf("%w: a decimal of more than %d significant digits", ErrTooLong, MaxDigits)
	}
	return nil
}

// coefWords is the size of d's coefficient in 64-bit words. decimal
// offers no size accessor that neither allocates (Coefficient copies)
// nor converts (NumDigits computes 10^n: 5.6 ms for 200,000 digits), so
// it reads the big.Int's word slice length in place, at the offsets that
// reflection found at init (layout); without them it falls back to the
// copy. Reflection per call cost a tenth of a near-cache cart line.
func coefWords(d decimal.Decimal) int {
	if !layout.ok {
		return (d.Coefficient().BitLen() + 63) / 64
	}
	b := *(**big.Int)(unsafe.Add(unsafe.Pointer(&d), layout.coef))
	if b == nil {
		return 0
	}
	return len(*(*[]big.Word)(unsafe.Add(unsafe.Pointer(b), layout.words)))
}

// layout: where decimal.Decimal keeps its *big.Int coefficient and
// big.Int its word slice; ok only when both fields have those types.
var layout = func() (l struct {
	ok          bool
	coef, words uintptr
}) {
	dt, bt := reflect.TypeFor[decimal.Decimal](), reflect.TypeFor[big.Int]()
	for i := 0; i < dt.NumField(); i++ {
		if f := dt.Field(i); f.Type == reflect.TypeFor[*big.Int]() {
			for j := 0; j < bt.NumField(); j++ {
				if g := bt.Field(j); g.Type.Kind() == reflect.Slice && g.Type.Elem() == reflect.TypeFor[big.Word]() {
					l.ok, l.coef, l.words = true, f.Offset, g.Offset
					return l
				}
			}
		}
	}
	return l
}()

// magnitude returns n such that 10^(n-1) ≤ |d|·10^shift < 10^n for a
// non-zero d that passed CheckDecimal, in int64 so no exponent overflows.
func magnitude(d decimal.Decimal, shift int) int64 {
	return int64(d.NumDigits()) + int64(d.Exponent()) + int64(shift)
}

// show renders d for an error message: its text when short, otherwise
// its leading digits and exponent, so a value like 1e999999999 is never
// expanded into a string. d must have passed CheckDecimal.
func show(d decimal.Decimal) string {
	if e := d.Exponent(); e > -MaxNumberLen && e < MaxNumberLen && d.NumDigits() <= MaxNumberLen {
		return d.String()
	}
	c := d.Coefficient().String() // ≤ MaxDigits digits
	if len(c) > 20 {
		return fmt.Sprintf("%s…(%d digits)e%d", c[:20], len(c), d.Exponent())
	}
	return fmt.Sprintf("%se%d", c, d.Exponent())
}
