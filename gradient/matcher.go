package gradient

import (
	"fmt"
	"sort"

	"github.com/shopspring/decimal"
)

// Matcher answers "which tier does this value hit?" in memory with a
// binary search. It is the oracle the Redis-backed cache is tested
// against, and it can serve as a local snapshot of a promotion.
type Matcher struct {
	promo  Promotion
	scores []int64 // ascending
	order  []int   // order[i] is the index in promo.Tiers of the i-th lowest tier
}

// NewMatcher validates p and builds a matcher over a copy of its tiers
// list, so later edits to p do not change the matcher.
func NewMatcher(p Promotion) (*Matcher, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p.Tiers = append([]Tier(nil), p.Tiers...)
	m := &Matcher{promo: p, scores: make([]int64, len(p.Tiers)), order: make([]int, len(p.Tiers))}
	for i := range p.Tiers {
		m.order[i] = i
	}
	all := make([]int64, len(p.Tiers))
	for i := range p.Tiers {
		all[i], _ = p.ScoreOf(&p.Tiers[i]) // Validate proved it encodes
	}
	sort.Slice(m.order, func(a, b int) bool { return all[m.order[a]] < all[m.order[b]] })
	for i, idx := range m.order {
		m.scores[i] = all[idx]
	}
	return m, nil
}

// Promotion returns the promotion the matcher was built from.
func (m *Matcher) Promotion() *Promotion { return &m.promo }

// Len returns the number of tiers.
func (m *Matcher) Len() int { return len(m.scores) }

// Hit is the answer to a match.
type Hit struct {
	// Tier is the hit tier, nil when the value is below every threshold.
	Tier *Tier
	// Score is the hit tier's score.
	Score int64
	// Next is the lowest tier above the hit (or the lowest tier when
	// nothing was hit), nil when the hit is the top tier.
	Next *Tier
	// NextScore is Next's score.
	NextScore int64
	// Shortfall is how much more of the metric reaches Next ("buy 2 more
	// to get 20% off"), zero when Next is nil.
	Shortfall decimal.Decimal
}

// MatchScore finds the largest threshold ≤ s, and the next one above. When
// s is below every threshold it returns ErrNoTier together with a Hit whose
// Next is the lowest tier, so callers can still show the upsell.
func (m *Matcher) MatchScore(s int64) (Hit, error) {
	if s < 0 {
		return Hit{}, fmt.Errorf("%w: score %d is negative", ErrBadValue, s)
	}
	// i = number of tiers with score ≤ s.
	i := sort.Search(len(m.scores), func(k int) bool { return m.scores[k] > s })
	var h Hit
	if i > 0 {
		h.Tier = &m.promo.Tiers[m.order[i-1]]
		h.Score = m.scores[i-1]
	}
	if i < len(m.scores) {
		h.Next = &m.promo.Tiers[m.order[i]]
		h.NextScore = m.scores[i]
		h.Shortfall = m.promo.ScoreValue(h.NextScore - s)
	}
	if h.Tier == nil {
		return h, ErrNoTier
	}
	return h, nil
}

// Match encodes v with the promotion's metric (flooring amounts to minor
// units) and calls MatchScore.
func (m *Matcher) Match(v decimal.Decimal) (Hit, error) {
	s, err := m.promo.QueryScore(v)
	if err != nil {
		return Hit{}, err
	}
	return m.MatchScore(s)
}

// Scores returns the tier scores in ascending order (a copy).
func (m *Matcher) Scores() []int64 { return append([]int64(nil), m.scores...) }
