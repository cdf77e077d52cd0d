package budget

import (
	"context"

	"github.com/tierset/tierset/cache"
)

// Offer says whether a cart line's promotion can still be given to the
// customer: the budget's answer for one cache.Result.
type Offer struct {
	Promotion string
	// Hit: the line reached a tier (Result.Tier is set). A line that did
	// not gives nothing and is not asked about: its Offer is only this.
	Hit bool
	// Budgeted: the budget defines the hit's promotion. A hit the budget
	// does not know is not capped here (OK, Left NoCap for both).
	Budgeted bool
	// Left is what the promotion still allows these attributes now.
	Left Left
	// OK: the promotion can still be given once: a use and some spend
	// left (or no cap on them). Left.Allows checks a line's own uses and
	// discount.
	OK bool
}

// Allows says whether uses and amount (minor units) fit in what is left.
func (l Left) Allows(uses, amount int64) bool {
	return (l.Uses == NoCap || l.Uses >= uses) && (l.Spend == NoCap || l.Spend >= amount)
}

// Offers answers, per result of a cart's match (cache.Cache.MatchCart,
// in its order), whether the hit's promotion can still be given for the
// customer's attributes: one Remaining call for every budgeted hit, so
// one round trip after the match, none when no hit is budgeted. With a
// near cache answering the match from memory, a priced cart is then one
// round trip in all; from Redis, two. The answer is what the caps allow
// now: a Reserve at checkout may still be refused by a cart that took
// the last use meanwhile, and its LimitError then decides.
//
// Bad attributes (a value a cap counts per is missing) return a
// *ValidationError and send nothing.
func (b *Budget) Offers(ctx context.Context, attrs map[string]string, rs []cache.Result) ([]Offer, error) {
	out := make([]Offer, len(rs))
	var ask []string
	seen := map[string]bool{}
	for i, r := range rs {
		out[i] = Offer{Promotion: r.Promotion, Hit: r.Tier != nil}
		if !out[i].Hit {
			continue
		}
		if _, ok := b.Promotion(r.Promotion); !ok {
			out[i].Left, out[i].OK = Left{Uses: NoCap, Spend: NoCap}, true
			continue
		}
		out[i].Budgeted = true
		if !seen[r.Promotion] {
			seen[r.Promotion] = true
			ask = append(ask, r.Promotion)
		}
	}
	if len(ask) == 0 {
		return out, nil
	}
	if len(ask) > MaxLines {
		return nil, invalid("lines", "%d budgeted promotions hit (allowed 1..%d)", len(ask), MaxLines)
	}
	left, err := b.Remaining(ctx, attrs, ask...)
	if err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Budgeted {
			l := left[out[i].Promotion]
			out[i].Left, out[i].OK = l, l.Uses != 0 && l.Spend != 0
		}
	}
	return out, nil
}
