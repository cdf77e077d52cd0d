package gradient

import (
	"errors"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/shopspring/decimal"
	"github.com/tierset/tierset/score"
)

// Limits enforced by Validate.
const (
	// MaxIDLen bounds promotion, tier and gift SKU IDs, in bytes.
	MaxIDLen = 128
	// MaxTiers bounds the tiers of one promotion. A refresh writes all of
	// them in one transaction; 10k keeps that well under a second.
	MaxTiers = 10000
	// MaxGiftsPerTier bounds the gifts of one tier.
	MaxGiftsPerTier = 100
	// MaxGiftQty bounds one gift's quantity.
	MaxGiftQty = 1000
	// MaxNameLen bounds a gift's display name, in bytes.
	MaxNameLen = 256
)

// ValidateID checks a promotion or tier ID: non-empty, at most MaxIDLen
// bytes, valid UTF-8, and no braces (they would break the Redis Cluster
// hash tag), whitespace, control or format characters (bidi overrides).
func ValidateID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty", ErrBadID)
	}
	if len(id) > MaxIDLen {
		return fmt.Errorf("%w: %d bytes (max %d)", ErrBadID, len(id), MaxIDLen)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrBadID, id)
	}
	for _, r := range id {
		switch {
		case r == '{' || r == '}':
			return fmt.Errorf("%w: %q contains a brace", ErrBadID, id)
		case unicode.IsSpace(r):
			return fmt.Errorf("%w: %q contains whitespace", ErrBadID, id)
		case unicode.IsControl(r):
			return fmt.Errorf("%w: %q contains a control character", ErrBadID, id)
		case unicode.Is(unicode.Cf, r):
			return fmt.Errorf("%w: %q contains a format character %U", ErrBadID, id, r)
		}
	}
	return nil
}

// Validate checks everything a warm-up must pass before anything is
// written. It reports the first problem as a *ValidationError naming the
// promotion, the tier and the field.
func (p *Promotion) Validate() error {
	if err := ValidateID(p.ID); err != nil {
		return promoErr(p, "id", ErrBadID, "%v", unwrapDetail(err))
	}
	if p.Revision < 0 {
		return promoErr(p, "revision", ErrInvalid, "%d is negative (0 means unordered)", p.Revision)
	}
	if p.MinorDigits < NoMinorDigits || p.MinorDigits > score.MaxMinorDigits {
		return promoErr(p, "minor_digits", ErrBadMetric, "%d (allowed 1..%d, 0 for the default %d, or NoMinorDigits (-1))",
			p.MinorDigits, score.MaxMinorDigits, DefaultMinorDigits)
	}
	switch p.Metric {
	case Quantity, Amount:
	default:
		return promoErr(p, "metric", ErrBadMetric, "%d is neither quantity nor amount", p.Metric)
	}
	switch p.Kind {
	case Threshold, ParityPrice, ParityDiscount:
	default:
		return promoErr(p, "kind", ErrBadMetric, "unknown rule kind %d", p.Kind)
	}
	if !p.Start.IsZero() && !p.End.IsZero() && !p.End.After(p.Start) {
		return promoErr(p, "window", ErrBadWindow, "end %s is not after start %s",
			p.End.UTC().Format("2006-01-02T15:04:05Z07:00"), p.Start.UTC().Format("2006-01-02T15:04:05Z07:00"))
	}
	if len(p.Tiers) == 0 {
		return promoErr(p, "tiers", ErrNoTiers, "at least one tier is required")
	}
	if len(p.Tiers) > MaxTiers {
		return promoErr(p, "tiers", ErrTooManyTiers, "%d tiers (max %d)", len(p.Tiers), MaxTiers)
	}
	ids := make(map[string]int, len(p.Tiers))
	scores := make(map[int64]int, len(p.Tiers))
	for i := range p.Tiers {
		t := &p.Tiers[i]
		if err := ValidateID(t.ID); err != nil {
			return tierErr(p, i, "id", ErrBadID, "%v", unwrapDetail(err))
		}
		if j, dup := ids[t.ID]; dup {
			return tierErr(p, i, "id", ErrDuplicateTierID, "%q is also the id of tier %d", t.ID, j)
		}
		ids[t.ID] = i
		s, err := p.ScoreOf(t)
		if err != nil {
			return causeErr(p, i, p.matchField(), ErrThreshold, err)
		}
		if s <= 0 {
			return tierErr(p, i, p.matchField(), ErrThreshold, "%s must be > 0", p.matchValue(t).String())
		}
		if s >= score.MaxExact {
			// 2^53 itself is exact, but stores reserve it as the ceiling
			// above every tier, so thresholds stay strictly below.
			return tierErr(p, i, p.matchField(), ErrThreshold, "%s is %d score units, must be below 2^53", p.matchValue(t).String(), s)
		}
		if j, dup := scores[s]; dup {
			return tierErr(p, i, p.matchField(), ErrDuplicateThreshold, "%s equals the %s of tier %d (id %q)",
				p.matchValue(t).String(), p.matchField(), j, p.Tiers[j].ID)
		}
		scores[s] = i
		if err := p.validateReward(&t.Reward); err != nil {
			return tierErr(p, i, "reward", ErrBadReward, "%v", err)
		}
		if len(t.Gifts) > MaxGiftsPerTier {
			return tierErr(p, i, "gifts", ErrBadGift, "%d gifts (max %d)", len(t.Gifts), MaxGiftsPerTier)
		}
		for g := range t.Gifts {
			if err := validateGift(&t.Gifts[g]); err != nil {
				return tierErr(p, i, fmt.Sprintf("gifts[%d]", g), ErrBadGift, "%v", err)
			}
		}
	}
	return nil
}

// unwrapDetail drops the sentinel prefix so messages do not repeat it.
func unwrapDetail(err error) string {
	s := err.Error()
	if u := errors.Unwrap(err); u != nil {
		prefix := u.Error() + ": "
		if len(s) > len(prefix) && s[:len(prefix)] == prefix {
			return s[len(prefix):]
		}
	}
	return s
}

func (p *Promotion) matchField() string {
	if p.Kind == Threshold {
		return "threshold"
	}
	return "match_value"
}

func (p *Promotion) matchValue(t *Tier) decimal.Decimal {
	if p.Kind == Threshold {
		return t.Threshold
	}
	return t.MatchValue
}

// ScoreOf encodes the field a tier is matched on (Threshold, or MatchValue
// for the parity kinds) as its score: a count for Quantity, exact minor
// units for Amount. A fractional count or an amount with more fractional
// digits than MinorDigits is refused, never rounded.
func (p *Promotion) ScoreOf(t *Tier) (int64, error) {
	v := p.matchValue(t)
	if err := score.CheckDecimal(v); err != nil {
		return 0, err
	}
	if p.Metric == Quantity {
		if !v.IsInteger() {
			return 0, fmt.Errorf("%w: count %s is not an integer", score.ErrTooPrecise, v.String())
		}
		if v.Sign() < 0 {
			return 0, fmt.Errorf("%w: count %s", score.ErrNegative, v.String())
		}
		if v.GreaterThan(decimal.NewFromInt(score.MaxExact)) {
			return 0, fmt.Errorf("%w: count %s", score.ErrOutOfRange, v.String())
		}
		return score.Count(v.IntPart())
	}
	return score.Amount(v, Digits(p.MinorDigits))
}

// QueryScore encodes a cart-side value for matching. Amounts are floored to
// minor units, which is exact for "largest threshold ≤ value"; counts are
// floored too, so 7.5 items is 7.
func (p *Promotion) QueryScore(v decimal.Decimal) (int64, error) {
	return QueryScore(p.Metric, p.MinorDigits, v)
}

// QueryScore encodes a cart-side value for a promotion of the given metric
// and MinorDigits (0 means DefaultMinorDigits, see [Digits]).
func QueryScore(m Metric, minorDigits int, v decimal.Decimal) (int64, error) {
	// The size check comes first: the value is the caller's, and printing
	// or scaling a 200,000-digit decimal costs far more than the check.
	if err := score.CheckDecimal(v); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrBadValue, err)
	}
	if v.Sign() < 0 {
		return 0, fmt.Errorf("%w: %s is negative", ErrBadValue, v.String())
	}
	var s int64
	var err error
	if m == Quantity {
		s, err = score.AmountFloor(v, 0)
	} else {
		s, err = score.AmountFloor(v, Digits(minorDigits))
	}
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrBadValue, err)
	}
	return s, nil
}

// ScoreValue turns a score back into the metric value it encodes.
func (p *Promotion) ScoreValue(s int64) decimal.Decimal {
	if p.Metric == Quantity {
		return decimal.NewFromInt(s)
	}
	return score.MinorToAmount(s, Digits(p.MinorDigits))
}

func (p *Promotion) validateReward(r *Reward) error {
	for _, d := range []decimal.Decimal{r.Percent, r.Amount, r.Step, r.Cap} {
		if err := score.CheckDecimal(d); err != nil {
			return err
		}
	}
	digits := int32(Digits(p.MinorDigits))
	money := func(name string, d decimal.Decimal, mustPositive bool) error {
		if d.Sign() < 0 || (mustPositive && d.Sign() == 0) {
			return fmt.Errorf("%s %s must be > 0", name, d.String())
		}
		if !d.Equal(d.Truncate(digits)) {
			return fmt.Errorf("%s %s has more than %d fractional digits", name, d.String(), digits)
		}
		if d.GreaterThan(decimal.NewFromInt(score.MaxExact).Shift(-digits)) {
			return fmt.Errorf("%s %s is out of range", name, d.String())
		}
		return nil
	}
	if r.Cap.Sign() != 0 {
		if err := money("cap", r.Cap, true); err != nil {
			return err
		}
	}
	switch r.Kind {
	case PercentOff:
		if r.Percent.Sign() <= 0 || r.Percent.GreaterThan(decimal.NewFromInt(100)) {
			return fmt.Errorf("percent %s must be in (0, 100]", r.Percent.String())
		}
		if !r.Percent.Equal(r.Percent.Truncate(4)) {
			return fmt.Errorf("percent %s has more than 4 fractional digits", r.Percent.String())
		}
	case AmountOff:
		return money("amount", r.Amount, true)
	case FixedPrice:
		return money("amount", r.Amount, false)
	case EveryN:
		if err := money("amount", r.Amount, true); err != nil {
			return err
		}
		if r.Step.Sign() <= 0 {
			return fmt.Errorf("step %s must be > 0", r.Step.String())
		}
		if p.Metric == Quantity && !r.Step.IsInteger() {
			return fmt.Errorf("step %s must be a whole count", r.Step.String())
		}
	default:
		return fmt.Errorf("unknown reward kind %d", r.Kind)
	}
	return nil
}

func validateGift(g *Gift) error {
	if err := ValidateID(g.SKU); err != nil {
		return fmt.Errorf("sku: %s", unwrapDetail(err))
	}
	if g.Qty <= 0 || g.Qty > MaxGiftQty {
		return fmt.Errorf("qty %d must be in 1..%d", g.Qty, MaxGiftQty)
	}
	if len(g.Name) > MaxNameLen || !utf8.ValidString(g.Name) {
		return fmt.Errorf("name must be valid UTF-8 of at most %d bytes", MaxNameLen)
	}
	for _, r := range g.Name {
		// A name is shown to shoppers and printed by tools; a control or
		// format character (ESC, CR, a bidi override) is never meant.
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return fmt.Errorf("name %s contains a control or format character %U", strconv.QuoteToASCII(g.Name), r)
		}
	}
	return nil
}
