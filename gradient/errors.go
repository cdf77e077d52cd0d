package gradient

import (
	"errors"
	"fmt"
	"strconv"
)

// Sentinel errors. Validation failures are *ValidationError values that
// wrap one of these and also match ErrInvalid.
var (
	// ErrInvalid matches every validation failure.
	ErrInvalid = errors.New("gradient: invalid promotion")
	// ErrBadID: an empty, oversized or ill-formed promotion, tier or gift ID.
	ErrBadID = errors.New("gradient: bad id")
	// ErrBadMetric: a metric or rule kind that is not one of the defined ones.
	ErrBadMetric = errors.New("gradient: bad metric or rule kind")
	// ErrNoTiers: a promotion without tiers.
	ErrNoTiers = errors.New("gradient: promotion has no tiers")
	// ErrTooManyTiers: more tiers than MaxTiers.
	ErrTooManyTiers = errors.New("gradient: too many tiers")
	// ErrDuplicateTierID: two tiers share an ID.
	ErrDuplicateTierID = errors.New("gradient: duplicate tier id")
	// ErrDuplicateThreshold: two tiers share a threshold (after encoding to
	// the score), so "which tier do I hit?" would have two answers.
	ErrDuplicateThreshold = errors.New("gradient: duplicate threshold")
	// ErrThreshold: a threshold that is not > 0, not representable in the
	// score codec, or a fractional item count.
	ErrThreshold = errors.New("gradient: bad threshold")
	// ErrBadReward: a reward whose kind or fields make no sense.
	ErrBadReward = errors.New("gradient: bad reward")
	// ErrBadGift: a gift without SKU, with a non-positive quantity, or too many gifts.
	ErrBadGift = errors.New("gradient: bad gift")
	// ErrBadWindow: a validity window whose end is not after its start.
	ErrBadWindow = errors.New("gradient: bad validity window")
	// ErrBadValue: a query value that is negative or not representable.
	ErrBadValue = errors.New("gradient: bad query value")
	// ErrNoTier: the value is below the lowest threshold.
	ErrNoTier = errors.New("gradient: no tier reached")
)

// ValidationError says which promotion, which tier and which field broke
// which rule. It wraps one sentinel (errors.Is works) and also matches
// ErrInvalid.
type ValidationError struct {
	Promotion string
	// TierIndex is the tier's position in Promotion.Tiers, -1 when the
	// error concerns the promotion itself.
	TierIndex int
	TierID    string
	Field     string
	Detail    string
	// Err is this package's sentinel for the broken rule.
	Err error
	// Cause is the underlying error, such as a score codec sentinel, or nil.
	Cause error
}

func (e *ValidationError) Error() string {
	s := "gradient: promotion " + strconv.Quote(e.Promotion)
	if e.TierIndex >= 0 {
		s += " tier " + strconv.Itoa(e.TierIndex)
		if e.TierID != "" {
			s += " (id " + strconv.Quote(e.TierID) + ")"
		}
	}
	if e.Field != "" {
		s += ": " + e.Field
	}
	return s + ": " + e.Detail
}

// Unwrap exposes both the rule's sentinel and the underlying cause, so
// errors.Is works for gradient.ErrThreshold and score.ErrTooPrecise alike.
func (e *ValidationError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Cause}
}

// Is makes every ValidationError match ErrInvalid.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

func promoErr(p *Promotion, field string, sentinel error, format string, args ...any) *ValidationError {
	return &ValidationError{Promotion: p.ID, TierIndex: -1, Field: field, Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}

func tierErr(p *Promotion, i int, field string, sentinel error, format string, args ...any) *ValidationError {
	return &ValidationError{Promotion: p.ID, TierIndex: i, TierID: p.Tiers[i].ID, Field: field, Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}

// causeErr wraps a lower-level error (from score/) as a tier error that
// keeps it in the chain and drops its repeated sentinel text.
func causeErr(p *Promotion, i int, field string, sentinel, cause error) *ValidationError {
	e := tierErr(p, i, field, sentinel, "%s", unwrapDetail(cause))
	e.Cause = cause
	return e
}
