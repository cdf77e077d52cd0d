package cache

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/tierset/tierset/gradient"
)

// Verdicts of one Result against the in-memory oracle.
const (
	vOK       = "ok"        // the oracle's answer, gifts included when asked for
	vDamaged  = "damaged"   // ErrDamaged, with the right tier when one is kept
	vNotFound = "not_found" // ErrNotFound
	vWrong    = "wrong"     // anything else: a wrong answer or an unexpected error
)

// verdict judges r, the answer for score s with opt, against m. The
// fault and damage tests allow only vOK, vDamaged and vNotFound; every
// vWrong is counted and must stay 0.
func verdict(m *gradient.Matcher, s int64, r Result, opt MatchOptions) (string, string) {
	want, werr := m.MatchScore(s)
	tierOK := func() string {
		switch {
		case werr != nil && r.Tier != nil:
			return fmt.Sprintf("score %d: tier %s, want none", s, r.Tier.ID)
		case werr != nil:
			return ""
		case r.Tier == nil:
			return fmt.Sprintf("score %d: no tier, want %s", s, want.Tier.ID)
		}
		w, g := want.Tier, r.Tier
		if g.ID != w.ID || g.Score != want.Score || g.Reward.Kind != w.Reward.Kind || !g.Reward.Percent.Equal(w.Reward.Percent) ||
			!g.Reward.Amount.Equal(w.Reward.Amount) || !g.Reward.Step.Equal(w.Reward.Step) || !g.Reward.Cap.Equal(w.Reward.Cap) ||
			g.HasGifts != (len(w.Gifts) > 0) {
			return fmt.Sprintf("score %d: tier %+v, want %+v", s, *g, *w)
		}
		return ""
	}
	switch {
	case errors.Is(r.Err, ErrNotFound):
		return vNotFound, ""
	case errors.Is(r.Err, ErrDamaged):
		if r.Tier != nil { // gift list missing: the hit itself must be right
			if d := tierOK(); d != "" {
				return vWrong, d
			}
		}
		return vDamaged, ""
	case r.Err != nil && !(werr != nil && errors.Is(r.Err, ErrNoTier)):
		return vWrong, fmt.Sprintf("score %d: error %v", s, r.Err)
	}
	if d := tierOK(); d != "" {
		return vWrong, d
	}
	if opt.Gifts && r.Tier != nil && len(want.Tier.Gifts) > 0 && !reflect.DeepEqual(r.Tier.Gifts, want.Tier.Gifts) {
		return vWrong, fmt.Sprintf("score %d: gifts %v, want %v", s, r.Tier.Gifts, want.Tier.Gifts)
	}
	if opt.Next {
		switch {
		case want.Next == nil && r.Next != nil:
			return vWrong, fmt.Sprintf("score %d: next %s, want none", s, r.Next.ID)
		case want.Next != nil && (r.Next == nil || r.Next.ID != want.Next.ID || !r.Shortfall.Equal(want.Shortfall)):
			return vWrong, fmt.Sprintf("score %d: next %+v shortfall %s, want %s %s", s, r.Next, r.Shortfall, want.Next.ID, want.Shortfall)
		}
	}
	return vOK, ""
}

// matchOpts are the four ways a cart is read.
var matchOpts = []MatchOptions{{}, {Next: true}, {Gifts: true}, {Next: true, Gifts: true}}

// tally counts verdicts and keeps the first wrong answer's detail.
type tally struct {
	n     map[string]int
	first string
}

func newTally() *tally { return &tally{n: map[string]int{}} }

func (t *tally) add(kind, detail string) {
	t.n[kind]++
	if kind == vWrong && t.first == "" {
		t.first = detail
	}
}

func (t *tally) String() string {
	return fmt.Sprintf("ok=%d damaged=%d not_found=%d wrong=%d %s", t.n[vOK], t.n[vDamaged], t.n[vNotFound], t.n[vWrong], t.first)
}
