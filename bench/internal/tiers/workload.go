package tiers

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/shopspring/decimal"
	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
)

// minorDigits is the currency of every bench promotion (cents).
const minorDigits = 2

// Pre-generated query counts: enough distinct values that the server walks
// different skiplist paths, few enough to build in milliseconds.
const (
	singleQueries = 4096
	cartQueries   = 512
)

// singleQuery is one pre-generated lookup, in the forms each impl takes,
// all computed outside the timed loop: the library gets the decimal (its
// own conversion is part of what it costs), the raw baselines get the
// bound string and the score.
type singleQuery struct {
	q     cache.Query
	key   string
	score int64
	bound string
}

// workload is one tier count's data: lines promotions with the same number
// of tiers (the first one serves the single lookups), their oracles, and
// the query values every impl replays.
type workload struct {
	tiers    int
	prefix   string
	promos   []gradient.Promotion
	matchers []*gradient.Matcher
	keys     []string
	single   []singleQuery
	carts    [][]singleQuery
	cartQs   [][]cache.Query
}

// newWorkload builds promotions with random cent gaps between thresholds
// and the query values, deterministically from seed.
func newWorkload(prefix string, tiers, lines int, seed uint64) (*workload, error) {
	if lines < 1 {
		lines = 1
	}
	rng := rand.New(rand.NewPCG(seed, uint64(tiers)))
	w := &workload{tiers: tiers, prefix: prefix}
	for i := 0; i < lines; i++ {
		p := randomPromotion(rng, fmt.Sprintf("bench-t%d-p%d", tiers, i), tiers)
		m, err := gradient.NewMatcher(p)
		if err != nil {
			return nil, fmt.Errorf("bench: generated promotion %s: %w", p.ID, err)
		}
		w.promos = append(w.promos, p)
		w.matchers = append(w.matchers, m)
		w.keys = append(w.keys, Key(prefix, p.ID))
	}
	for i := 0; i < singleQueries; i++ {
		w.single = append(w.single, w.hittingQuery(rng, 0))
	}
	for i := 0; i < cartQueries; i++ {
		cart := make([]singleQuery, lines)
		qs := make([]cache.Query, lines)
		for l := range cart {
			cart[l] = w.hittingQuery(rng, l)
			qs[l] = cart[l].q
		}
		w.carts = append(w.carts, cart)
		w.cartQs = append(w.cartQs, qs)
	}
	return w, nil
}

func randomPromotion(rng *rand.Rand, id string, tiers int) gradient.Promotion {
	p := gradient.Promotion{ID: id, Metric: gradient.Amount, MinorDigits: minorDigits}
	cents := int64(100 + rng.IntN(10000))
	for t := 0; t < tiers; t++ {
		p.Tiers = append(p.Tiers, gradient.Tier{
			ID:        "t" + strconv.Itoa(t),
			Threshold: decimal.New(cents, -minorDigits),
			Reward:    gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(int64(1 + t%50))},
		})
		cents += int64(1 + rng.IntN(5000))
	}
	return p
}

// hittingQuery draws a value between promotion l's lowest threshold and a
// little above its highest, so every timed lookup is a hit (a miss would
// let an impl skip its decode).
func (w *workload) hittingQuery(rng *rand.Rand, l int) singleQuery {
	scores := w.matchers[l].Scores()
	lo, hi := scores[0], scores[len(scores)-1]+5000
	return w.query(l, lo+rng.Int64N(hi-lo+1))
}

// query builds the lookup of score s (minor units) on promotion l.
func (w *workload) query(l int, s int64) singleQuery {
	v := decimal.New(s, -minorDigits)
	return singleQuery{
		q:     cache.AmountQuery(w.promos[l].ID, v),
		key:   w.keys[l],
		score: s,
		bound: strconv.FormatInt(s, 10),
	}
}

// warm writes the promotions through the library, the way a warm-up job does.
func (w *workload) warm(ctx context.Context, c *cache.Cache) error {
	// A few promotions per Refresh keeps each transaction a sane size at 3000 tiers.
	const batch = 4
	for i := 0; i < len(w.promos); i += batch {
		j := min(i+batch, len(w.promos))
		if _, err := c.Refresh(ctx, w.promos[i:j]...); err != nil {
			return fmt.Errorf("bench: warm %d tiers: %w", w.tiers, err)
		}
	}
	return nil
}

// remove deletes the promotions through the library.
func (w *workload) remove(ctx context.Context, c *cache.Cache) error {
	for _, p := range w.promos {
		if _, err := c.Delete(ctx, p.ID, 0); err != nil {
			return fmt.Errorf("bench: delete %s: %w", p.ID, err)
		}
	}
	return nil
}

// verifyQueries are the values the oracle check replays: a sample of the
// timed values plus the boundaries (at a threshold, one cent below, below
// the lowest, above the highest, zero).
func (w *workload) verifyQueries(rng *rand.Rand, l, n int) []singleQuery {
	var out []singleQuery
	scores := w.matchers[l].Scores()
	for _, s := range []int64{0, scores[0] - 1, scores[0], scores[len(scores)-1], scores[len(scores)-1] + 1, scores[len(scores)-1] + 1e6} {
		out = append(out, w.query(l, s))
	}
	for i := 0; i < n; i++ {
		t := scores[rng.IntN(len(scores))]
		out = append(out, w.query(l, t), w.query(l, t-1))
		if l == 0 {
			out = append(out, w.single[rng.IntN(len(w.single))])
		} else {
			out = append(out, w.hittingQuery(rng, l))
		}
	}
	return out
}
