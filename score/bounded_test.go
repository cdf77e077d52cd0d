package score_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/score"
)

// huge is 200,000 digits: the size of input the parsers must refuse
// without reading it.
var (
	hugeText = strings.Repeat("9", 200_000)
	hugeDec  = decimal.RequireFromString(hugeText)
)

func TestRefusesOverlongInputFast(t *testing.T) {
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"ParseAmount 200kB", func() error { _, err := score.ParseAmount(hugeText, 2); return err }, score.ErrTooLong},
		{"ParseAmount 200kB of spaces and digits", func() error { _, err := score.ParseAmount(" "+hugeText+".5 ", 2); return err }, score.ErrTooLong},
		{"ParseDecimal 200kB", func() error { _, err := score.ParseDecimal(hugeText); return err }, score.ErrTooLong},
		{"ParseString 200kB", func() error { _, err := score.ParseString(hugeText); return err }, score.ErrTooLong},
		{"Amount 200k digits", func() error { _, err := score.Amount(hugeDec, 2); return err }, score.ErrTooLong},
		{"AmountFloor 200k digits", func() error { _, err := score.AmountFloor(hugeDec, 2); return err }, score.ErrTooLong},
		{"AmountFloor -200k digits", func() error { _, err := score.AmountFloor(hugeDec.Neg(), 2); return err }, score.ErrTooLong},
		{"AmountFloor 1e999999999", func() error { _, err := score.AmountFloor(decimal.New(1, 999_999_999), 2); return err }, score.ErrOutOfRange},
		{"Amount 1e999999999", func() error { _, err := score.Amount(decimal.New(1, 999_999_999), 2); return err }, score.ErrOutOfRange},
		{"Amount 1e-999999999", func() error { _, err := score.Amount(decimal.New(1, -999_999_999), 2); return err }, score.ErrTooPrecise},
		{"Amount -1e999999999", func() error { _, err := score.Amount(decimal.New(-1, 999_999_999), 2); return err }, score.ErrNegative},
		{"ParseAmount 41 characters", func() error { _, err := score.ParseAmount("1"+strings.Repeat("0", score.MaxNumberLen), 2); return err }, score.ErrTooLong},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			err := c.call()
			took := time.Since(start)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			// Generous: catches a parse or an expansion of the input,
			// whose cost grows with its digits; the speed itself is
			// measured by BenchmarkRefuseOverlong.
			if took > 50*time.Millisecond {
				t.Errorf("took %v to refuse", took)
			}
			if len(err.Error()) > 200 {
				t.Errorf("error is %d bytes; it must quote only a prefix: %.200s", len(err.Error()), err)
			}
		})
	}
}

func TestBoundsKeepRealValues(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in     string
		digits int
		floor  int64
	}{
		{"90071992547409.91", 2, 9007199254740991},
		{"0.001", 2, 0},
		{"1" + strings.Repeat("0", 15), 0, 1e15},
		{"0." + strings.Repeat("0", 30) + "1", 2, 0},
		{"12.340000000000000000000000000000000000", 2, 1234}, // 40 characters
	}
	for _, c := range cases {
		d, err := score.ParseDecimal(c.in)
		if err != nil {
			t.Fatalf("ParseDecimal(%q): %v", c.in, err)
		}
		if got, err := score.AmountFloor(d, c.digits); err != nil || got != c.floor {
			t.Errorf("AmountFloor(%s, %d) = %d, %v; want %d", c.in, c.digits, got, err, c.floor)
		}
	}
	// 64 significant digits pass the size check; 65 do not.
	ok := decimal.RequireFromString("0." + strings.Repeat("1", score.MaxDigits))
	if err := score.CheckDecimal(ok); err != nil {
		t.Errorf("CheckDecimal(%d digits) = %v", score.MaxDigits, err)
	}
	long := decimal.RequireFromString("0." + strings.Repeat("1", score.MaxDigits+1))
	if err := score.CheckDecimal(long); !errors.Is(err, score.ErrTooLong) {
		t.Errorf("CheckDecimal(%d digits) = %v, want ErrTooLong", score.MaxDigits+1, err)
	}
}

func BenchmarkRefuseOverlong(b *testing.B) {
	b.Run("ParseAmount/200kB", func(b *testing.B) {
		for b.Loop() {
			if _, err := score.ParseAmount(hugeText, 2); err == nil {
				b.Fatal("accepted")
			}
		}
	})
	b.Run("AmountFloor/200k-digits", func(b *testing.B) {
		for b.Loop() {
			if _, err := score.AmountFloor(hugeDec, 2); err == nil {
				b.Fatal("accepted")
			}
		}
	})
	b.Run("AmountFloor/1e999999999", func(b *testing.B) {
		d := decimal.New(1, 999_999_999)
		for b.Loop() {
			if _, err := score.AmountFloor(d, 2); err == nil {
				b.Fatal("accepted")
			}
		}
	})
}
