package gradient

import (
	"strconv"
	"time"

	"github.com/shopspring/decimal"
)

// Minor digits. Every MinorDigits field and minorDigits parameter of the
// module ([Promotion.MinorDigits], cache.Options.MinorDigits,
// [Reward.Discount], [QueryScore]) reads the same way, so the zero value
// is the common currency everywhere.
const (
	// DefaultMinorDigits is what a MinorDigits of 0 stands for.
	DefaultMinorDigits = 2
	// NoMinorDigits is the MinorDigits of a currency without minor units
	// (JPY, KRW).
	NoMinorDigits = -1
)

// Digits returns the number of minor-unit digits a MinorDigits value
// stands for: [DefaultMinorDigits] for 0, 0 for [NoMinorDigits], the value
// itself otherwise. A value outside -1..9 is returned as is, for the
// score codec to refuse.
func Digits(minorDigits int) int {
	switch minorDigits {
	case 0:
		return DefaultMinorDigits
	case NoMinorDigits:
		return 0
	}
	return minorDigits
}

// Metric says what a promotion's thresholds count.
type Metric uint8

const (
	// Quantity thresholds are item counts ("buy 3 get 10% off").
	Quantity Metric = 1
	// Amount thresholds are money amounts ("spend 99.99 get 10 off"),
	// stored as integer minor units.
	Amount Metric = 2
)

var metricNames = [...]string{Quantity: "quantity", Amount: "amount"}

func (m Metric) String() string { return enumName(metricNames[:], m, "metric") }

// RuleKind says which field of a tier is matched against the cart value.
// All kinds map their match field to the one score, so the read side only
// ever compares against the score.
type RuleKind uint8

const (
	// Threshold (the zero value) matches on Tier.Threshold.
	Threshold RuleKind = 0
	// ParityPrice (奇偶定价) matches on Tier.MatchValue: the tier whose value
	// the cart reaches sets the price.
	ParityPrice RuleKind = 1
	// ParityDiscount (奇偶打折) matches on Tier.MatchValue like ParityPrice,
	// with a discount as the reward.
	ParityDiscount RuleKind = 2
)

var ruleKindNames = [...]string{Threshold: "threshold", ParityPrice: "parity-price", ParityDiscount: "parity-discount"}

func (k RuleKind) String() string { return enumName(ruleKindNames[:], k, "rule") }

// RewardKind is what a hit tier gives.
type RewardKind uint8

const (
	// PercentOff takes Reward.Percent percent off the base (10 = 10% off).
	PercentOff RewardKind = 1
	// AmountOff takes Reward.Amount off the base.
	AmountOff RewardKind = 2
	// FixedPrice sells the line for Reward.Amount in total; the discount is
	// base - Amount, never negative.
	FixedPrice RewardKind = 3
	// EveryN (每满减) takes Reward.Amount off for every full Reward.Step of
	// the metric value: every 100 spent gets 10 off.
	EveryN RewardKind = 4
)

var rewardKindNames = [...]string{PercentOff: "percent-off", AmountOff: "amount-off", FixedPrice: "fixed-price", EveryN: "every-n"}

func (k RewardKind) String() string { return enumName(rewardKindNames[:], k, "reward") }

// enumName is v's name in names, or kind(v) for a value without one.
func enumName[T ~uint8](names []string, v T, kind string) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return kind + "(" + strconv.Itoa(int(v)) + ")"
}

// Reward is what a tier gives. Amounts are in major units (99.99), exact.
type Reward struct {
	Kind RewardKind
	// Percent is the percentage off for PercentOff, in (0, 100].
	Percent decimal.Decimal
	// Amount is the amount off (AmountOff, EveryN per step) or the price
	// (FixedPrice).
	Amount decimal.Decimal
	// Step is EveryN's step in the promotion's metric (100 for "every 100
	// spent", 2 for "every 2 items").
	Step decimal.Decimal
	// Cap bounds the discount; zero means no cap.
	Cap decimal.Decimal
}

// Gift is an item handed out with a tier. Gifts are stored apart from the
// tiers and fetched only after a hit.
type Gift struct {
	SKU  string
	Qty  int
	Name string
}

// Tier is one step of a promotion.
type Tier struct {
	// ID is unique within the promotion.
	ID string
	// Threshold is the minimum metric value that hits the tier: an integer
	// count for Quantity, an amount in major units for Amount. Used by the
	// Threshold rule kind.
	Threshold decimal.Decimal
	// MatchValue is the matched field for the parity rule kinds.
	MatchValue decimal.Decimal
	Reward     Reward
	Gifts      []Gift
}

// Promotion is a set of tiers with one metric and one validity window.
type Promotion struct {
	ID     string
	Metric Metric
	// MinorDigits is the currency's minor-unit digits, in the module's one
	// convention (see [Digits]): 0 means [DefaultMinorDigits] (2, as for
	// USD, EUR or CNY), [NoMinorDigits] a currency without minor units
	// (JPY), 1..9 that many digits (3 for KWD). Amount thresholds and
	// every reward amount must be exact to it, and discounts are rounded
	// to it. Quantity thresholds are plain counts whatever its value.
	MinorDigits int
	Kind        RuleKind
	// Start and End bound the window in which the promotion is active,
	// [Start, End). A zero value leaves that side open.
	Start, End time.Time
	Tiers      []Tier
	// Revision is the source's revision of this promotion: it grows with
	// every change the source makes to it (PostgreSQL bumps a revision
	// column in the transaction of the change; a rules file states it, see
	// package rules), and across a delete and a re-create. The cache keeps
	// the revision it holds and refuses a write or delete carrying an
	// older one (cache.Stale), so a writer that read the source earlier
	// can never put back an older version. It is not part of the content:
	// two revisions with the same content store the same version. 0 means
	// unordered: the write replaces an unordered promotion, last writer
	// wins, but never one held at a revision or deleted at one (the cache
	// reports it Stale). Negative is invalid.
	Revision int64
}

// Active reports whether the promotion is active at t: Start ≤ t < End.
func (p *Promotion) Active(t time.Time) bool {
	if !p.Start.IsZero() && t.Before(p.Start) {
		return false
	}
	if !p.End.IsZero() && !t.Before(p.End) {
		return false
	}
	return true
}
