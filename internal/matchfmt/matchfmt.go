// Package matchfmt parses a match request and words its answer, for the
// CLI's match command and the console's simulator alike, so both show a
// floored amount the same way.
package matchfmt

import (
	"errors"
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/text"
	"github.com/tierset/tierset/score"
)

// Roundings maps a rounding's name to its mode.
var Roundings = map[string]gradient.Rounding{
	"down": gradient.RoundDown, "half-up": gradient.RoundHalfUp,
	"half-even": gradient.RoundHalfEven, "up": gradient.RoundUp,
}

// InputError is a request argument that does not parse; Msg names it as
// a flag ("-value ...").
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

func inputf(format string, args ...any) error { return &InputError{Msg: fmt.Sprintf(format, args...)} }

// Query is a parsed match request.
type Query struct {
	Value    decimal.Decimal
	Base     *decimal.Decimal
	Rounding gradient.Rounding
	RoundBy  string
	Now      func() time.Time
}

// Parse reads a match request's arguments; at "" is now.
func Parse(value, base, rounding, at string) (Query, error) {
	var q Query
	v, err := ParseAmount("-value", value, "7 or 150.00")
	if err != nil {
		return q, err
	}
	q.Value = v
	if base != "" {
		b, err := ParseAmount("-base", base, "139.30")
		if err != nil {
			return q, err
		}
		q.Base = &b
	}
	r, ok := Roundings[rounding]
	if !ok {
		return q, inputf("-rounding %s: want down, half-up, half-even or up", text.Quote(rounding))
	}
	q.Rounding, q.RoundBy = r, rounding
	q.Now = time.Now
	if at != "" {
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return q, inputf("-at %s: want an RFC 3339 time such as 2026-12-15T12:00:00+08:00", text.Quote(at))
		}
		q.Now = func() time.Time { return t }
	}
	return q, nil
}

// ParseAmount parses a non-negative decimal with score.ParseDecimal,
// which refuses an over-long one before reading it.
func ParseAmount(flag, s, example string) (decimal.Decimal, error) {
	d, err := score.ParseDecimal(s)
	if err == nil && d.Sign() >= 0 {
		return d, nil
	}
	if errors.Is(err, score.ErrTooLong) {
		return d, inputf("%s %s: longer than %d characters", flag, text.Quote(s), score.MaxNumberLen)
	}
	return d, inputf("%s %s: want a non-negative decimal such as %s", flag, text.Quote(s), example)
}

// Window is a promotion's validity window, "[start, end)".
func Window(info cache.Info) string {
	f := func(t time.Time, open string) string {
		if t.IsZero() {
			return open
		}
		return t.UTC().Format(time.RFC3339)
	}
	return "[" + f(info.Start, "-∞") + ", " + f(info.End, "+∞") + ")"
}

// MatchedValue is v as the cache matches it: floored to whole minor
// units for money, to whole items for a quantity (score.AmountFloor).
// floored reports whether that changed v.
func MatchedValue(info cache.Info, v decimal.Decimal) (m decimal.Decimal, floored bool) {
	digits := int32(gradient.Digits(info.MinorDigits))
	if info.Metric == gradient.Quantity {
		digits = 0
	}
	m = v.RoundFloor(digits)
	return m, !m.Equal(v)
}

// ShowMatched prints the value that was matched, saying so when it is
// the floor of what was asked rather than showing the asked value rounded.
func ShowMatched(info cache.Info, v decimal.Decimal) string {
	m, floored := MatchedValue(info, v)
	if !floored {
		return ShowValue(info, v)
	}
	unit := "minor unit"
	if info.Metric == gradient.Quantity {
		unit = "item"
	}
	return fmt.Sprintf("%s (floored from %s: matching counts whole %ss only)", ShowValue(info, m), v.String(), unit)
}

// ShowValue prints a metric value: "7 items", or money with the
// currency's digits ("150.00").
func ShowValue(info cache.Info, v decimal.Decimal) string {
	if info.Metric == gradient.Quantity {
		if v.Equal(decimal.NewFromInt(1)) {
			return "1 item"
		}
		return v.String() + " items"
	}
	return v.StringFixed(int32(gradient.Digits(info.MinorDigits)))
}

// DescribeReward words a reward: "10% off, capped at 50".
func DescribeReward(r gradient.Reward) string {
	var s string
	switch r.Kind {
	case gradient.PercentOff:
		s = r.Percent.String() + "% off"
	case gradient.AmountOff:
		s = r.Amount.String() + " off"
	case gradient.FixedPrice:
		s = "fixed price " + r.Amount.String()
	case gradient.EveryN:
		s = r.Amount.String() + " off per full " + r.Step.String()
	default:
		s = r.Kind.String()
	}
	if r.Cap.Sign() > 0 {
		s += ", capped at " + r.Cap.String()
	}
	return s
}

// Discount words what reward r takes off the query's base (the value
// itself for amount promotions).
func Discount(info cache.Info, q Query, r gradient.Reward) string {
	base := q.Base
	if base == nil {
		if info.Metric != gradient.Amount {
			return "pass -base (the line total in money) to compute it"
		}
		base = &q.Value
	}
	d, err := r.Discount(*base, q.Value, info.MinorDigits, q.Rounding)
	if err != nil {
		return "cannot compute: " + err.Error()
	}
	digits := int32(gradient.Digits(info.MinorDigits))
	return fmt.Sprintf("%s off %s, pay %s (rounding %s)", d.StringFixed(digits), base.StringFixed(digits), base.Sub(d).StringFixed(digits), q.RoundBy)
}
