package gradient

import (
	"fmt"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/score"
)

// Rounding is how a discount is brought to the currency's minor unit.
// There is no default on purpose: who gets the half cent is a business
// decision, so callers name it.
type Rounding uint8

const (
	// RoundDown truncates toward zero: the shop keeps the fraction.
	RoundDown Rounding = 1
	// RoundHalfUp rounds half away from zero (commercial rounding).
	RoundHalfUp Rounding = 2
	// RoundHalfEven rounds half to even (banker's rounding).
	RoundHalfEven Rounding = 3
	// RoundUp rounds away from zero: the customer gets the fraction.
	RoundUp Rounding = 4
)

func (r Rounding) apply(d decimal.Decimal, digits int32) (decimal.Decimal, error) {
	switch r {
	case RoundDown:
		return d.RoundDown(digits), nil
	case RoundHalfUp:
		return d.Round(digits), nil
	case RoundHalfEven:
		return d.RoundBank(digits), nil
	case RoundUp:
		return d.RoundUp(digits), nil
	}
	return decimal.Decimal{}, fmt.Errorf("%w: unknown rounding mode %d", ErrBadReward, r)
}

// Discount computes what the reward takes off a line, in decimal:
// base is the money the reward applies to (the line or cart total), value
// is the promotion's metric value (items for Quantity, money for Amount;
// EveryN counts its steps in it). The discount is rounded to minorDigits
// (0 means DefaultMinorDigits, NoMinorDigits none; see [Digits]) with
// mode, then capped by Cap, then by base: a discount never makes a price
// negative.
func (r Reward) Discount(base, value decimal.Decimal, minorDigits int, mode Rounding) (decimal.Decimal, error) {
	if base.Sign() < 0 {
		return decimal.Decimal{}, fmt.Errorf("%w: base %s is negative", ErrBadValue, base.String())
	}
	if value.Sign() < 0 {
		return decimal.Decimal{}, fmt.Errorf("%w: value %s is negative", ErrBadValue, value.String())
	}
	var d decimal.Decimal
	switch r.Kind {
	case PercentOff:
		d = base.Mul(r.Percent).Div(decimal.NewFromInt(100))
	case AmountOff:
		d = r.Amount
	case FixedPrice:
		d = base.Sub(r.Amount)
		if d.Sign() < 0 {
			d = decimal.Zero
		}
	case EveryN:
		if r.Step.Sign() <= 0 {
			return decimal.Decimal{}, fmt.Errorf("%w: every-n step %s", ErrBadReward, r.Step.String())
		}
		steps, _ := value.QuoRem(r.Step, 0) // exact integer quotient, no division rounding
		d = steps.Mul(r.Amount)
	default:
		return decimal.Decimal{}, fmt.Errorf("%w: unknown reward kind %d", ErrBadReward, r.Kind)
	}
	if minorDigits < NoMinorDigits || minorDigits > score.MaxMinorDigits {
		return decimal.Decimal{}, fmt.Errorf("%w: %w: %d", ErrBadValue, score.ErrMinorDigits, minorDigits)
	}
	d, err := mode.apply(d, int32(Digits(minorDigits)))
	if err != nil {
		return decimal.Decimal{}, err
	}
	if r.Cap.Sign() > 0 && d.GreaterThan(r.Cap) {
		d = r.Cap
	}
	if d.GreaterThan(base) {
		d = base
	}
	return d, nil
}
