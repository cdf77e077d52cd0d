// Package gradient is the promotion domain of tierset, in pure Go with no
// Redis: promotions, their tiers ("gradients"), rewards and gifts, the
// validation a warm-up must pass, the in-memory matcher, and the reward
// arithmetic.
//
//	p := gradient.Promotion{ID: "spend", Metric: gradient.Amount, Tiers: tiers}
//	if err := p.Validate(); err != nil { ... } // a *ValidationError naming the field
//	m, err := gradient.NewMatcher(p)
//	hit, err := m.Match(decimal.RequireFromString("120.00"))
//	off, err := hit.Tier.Reward.Discount(base, value, p.MinorDigits, gradient.RoundHalfUp)
//
// Minor digits read the same in every package of the module:
// [Promotion.MinorDigits] 0 means [DefaultMinorDigits] (2, as USD, EUR,
// CNY), [NoMinorDigits] a currency without minor units (JPY), 1..9 that
// many; [Digits] gives the count a value stands for.
//
// A [Promotion] has a [Metric] ([Quantity] or [Amount]), the currency's
// minor digits, a validity window and its [Tier] list. Each tier has a
// threshold, a [Reward] ([PercentOff], [AmountOff], [FixedPrice] or
// [EveryN], each with an optional cap) and optional [Gift] items. The
// parity rule kinds ([ParityPrice], [ParityDiscount]) match on
// [Tier.MatchValue] instead of [Tier.Threshold]; [Promotion.ScoreOf] maps
// either to the one score, so the read side only ever compares scores.
//
// [Promotion.Validate] runs before anything is written: thresholds unique
// (after encoding, so 99.99 and 99.990 collide) and > 0, within the score
// codec's range, at least one tier, unique tier IDs, sane rewards, well
// formed gifts, an ordered window. Failures are [*ValidationError] values
// naming the promotion, tier and field, matching [ErrInvalid] and a
// specific sentinel such as [ErrDuplicateThreshold].
//
// [Matcher] finds the largest threshold ≤ value by binary search, and the
// next tier above with the shortfall ("buy 2 more to get 20% off"). It is
// the oracle every Redis-backed test compares against.
//
// [Reward.Discount] computes a discount in decimal with an explicit
// [Rounding] mode, then applies the cap, and never exceeds the base.
package gradient
