package tiers

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/redis/go-redis/v9"
	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/score"
)

// verifySample is how many random values of the single-lookup promotion
// the oracle check replays (three lookups each: at a threshold, one cent
// below, a timed value).
const verifySample = 100

// verify checks, outside any timing, that every impl gives the oracle's
// answer on a sample of the timed values and on the boundaries, and that
// the sorted sets hold exactly the oracle's tiers. A benchmark whose impls
// disagree compares different work, so any mismatch aborts the run.
func (t target) verify(ctx context.Context, w *workload, sample int) error {
	members := make([]map[string]int64, len(w.promos))
	for l := range w.promos {
		m, err := t.memberScores(ctx, w, l)
		if err != nil {
			return err
		}
		members[l] = m
	}
	rng := rand.New(rand.NewPCG(uint64(w.tiers), 7))
	qs := w.verifyQueries(rng, 0, sample)
	for i := range qs {
		if err := t.verifySingle(ctx, w, members[0], &qs[i]); err != nil {
			return err
		}
	}
	// Carts: timed carts plus carts made of boundary values on every line.
	carts := make([][]singleQuery, 0, 40)
	for i := 0; i < 20; i++ {
		carts = append(carts, w.carts[rng.IntN(len(w.carts))])
	}
	perLine := make([][]singleQuery, len(w.promos))
	for l := range w.promos {
		perLine[l] = w.verifyQueries(rng, l, 5)
	}
	for k := 0; k < len(perLine[0]); k++ {
		cart := make([]singleQuery, len(w.promos))
		for l := range cart {
			cart[l] = perLine[l][k%len(perLine[l])]
		}
		carts = append(carts, cart)
	}
	for _, cart := range carts {
		if err := t.verifyCart(ctx, w, members, cart); err != nil {
			return err
		}
	}
	return nil
}

// memberScores reads promotion l's sorted set and checks that its tier
// members (sentinels aside, see isTierScore) carry
// exactly the oracle's scores. It returns member → score.
func (t target) memberScores(ctx context.Context, w *workload, l int) (map[string]int64, error) {
	zs, err := t.rc.ZRangeWithScores(ctx, w.keys[l], 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("bench: verify: read %s: %w", w.keys[l], err)
	}
	want := w.matchers[l].Scores()
	out := make(map[string]int64, len(zs))
	var got []int64
	for _, z := range zs {
		s, err := score.ParseFloat(z.Score)
		if err != nil {
			return nil, fmt.Errorf("bench: verify: %s: %w", w.keys[l], err)
		}
		m, _ := z.Member.(string)
		out[m] = s
		if isTierScore(s) {
			got = append(got, s)
		}
	}
	if len(got) != len(want) {
		return nil, fmt.Errorf("bench: verify: %s holds %d tiers, the oracle %d (key layout or warm-up differs)", w.keys[l], len(got), len(want))
	}
	for i := range got { // both ascending
		if got[i] != want[i] {
			return nil, fmt.Errorf("bench: verify: %s tier %d has score %d, the oracle %d", w.keys[l], i, got[i], want[i])
		}
	}
	return out, nil
}

// oracle answers q on promotion l: the tier ID and score, or ok=false below
// the lowest threshold.
func (w *workload) oracle(l int, s int64) (id string, sc int64, ok bool, err error) {
	h, err := w.matchers[l].MatchScore(s)
	if isNoTier(err) {
		return "", -1, false, nil
	}
	if err != nil {
		return "", 0, false, fmt.Errorf("bench: oracle: %w", err)
	}
	return h.Tier.ID, h.Score, true, nil
}

func mismatch(impl string, w *workload, q *singleQuery, got, want any) error {
	return fmt.Errorf("bench: verify: %s disagrees with the oracle at tiers=%d promotion %s value %s: got %v, want %v",
		impl, w.tiers, q.q.Promotion, q.q.Value.String(), got, want)
}

func (t target) verifySingle(ctx context.Context, w *workload, members map[string]int64, q *singleQuery) error {
	wantID, wantScore, wantOK, err := w.oracle(0, q.score)
	if err != nil {
		return err
	}
	// range, and near: the same Match answered from memory
	for _, c := range []struct {
		impl string
		lib  *cache.Cache
	}{{implRange, t.lib}, {implNear, t.near}} {
		if c.lib == nil {
			continue
		}
		h, err := matchRange(ctx, c.lib, q.q)
		switch {
		case !wantOK && !(isNoTier(err) && h == nil):
			return mismatch(c.impl, w, q, fmt.Sprintf("hit=%v err=%v", h, err), "no tier")
		case wantOK && err != nil:
			return fmt.Errorf("bench: verify: %s at %s: %w", c.impl, q.q.Value.String(), err)
		case wantOK && (h == nil || h.ID != wantID):
			return mismatch(c.impl, w, q, h, wantID)
		}
	}
	// raw: the member it returns must be the oracle's tier (or the sentinel).
	m, err := matchRaw(ctx, t.rc, q)
	if err != nil {
		return fmt.Errorf("bench: verify: raw at %s: %w", q.q.Value.String(), err)
	}
	if got, ok := members[m]; !ok || got != wantScore {
		return mismatch(implRaw, w, q, fmt.Sprintf("member with score %d (known %v)", got, ok), wantScore)
	}
	// fullscan
	fh, ok, err := matchFullScan(ctx, t.rc, q.key, q.score)
	if err != nil {
		return fmt.Errorf("bench: verify: fullscan at %s: %w", q.q.Value.String(), err)
	}
	if ok != wantOK || (ok && (fh.Score != wantScore || members[fh.Member] != wantScore)) {
		return mismatch(implFullScan, w, q, fmt.Sprintf("ok=%v score=%d", ok, fh.Score), fmt.Sprintf("ok=%v score=%d", wantOK, wantScore))
	}
	return nil
}

func (t target) verifyCart(ctx context.Context, w *workload, members []map[string]int64, cart []singleQuery) error {
	qs := make([]cache.Query, len(cart))
	for l := range cart {
		qs[l] = cart[l].q
	}
	rs, err := matchCart(ctx, t.lib, qs)
	if err != nil {
		return fmt.Errorf("bench: verify: cart: %w", err)
	}
	if t.near != nil {
		nrs, err := matchCart(ctx, t.near, qs)
		if err != nil {
			return fmt.Errorf("bench: verify: nearcart: %w", err)
		}
		if err := w.checkCart(implNearCart, cart, nrs); err != nil {
			return err
		}
	}
	if err := w.checkCart(implCart, cart, rs); err != nil {
		return err
	}
	cmds := make([]*redis.StringSliceCmd, len(cart))
	if err := matchRawCart(ctx, t.rc, cart, cmds); err != nil {
		return fmt.Errorf("bench: verify: rawcart: %w", err)
	}
	for l := range cart {
		_, wantScore, _, err := w.oracle(l, cart[l].score)
		if err != nil {
			return err
		}
		if got, ok := members[l][cmds[l].Val()[0]]; !ok || got != wantScore {
			return mismatch(implRawCart, w, &cart[l], fmt.Sprintf("member with score %d (known %v)", got, ok), wantScore)
		}
	}
	return nil
}

// checkCart compares a library cart's results (impl cart or nearcart)
// with the oracle, line by line.
func (w *workload) checkCart(impl string, cart []singleQuery, rs []cache.Result) error {
	for l := range cart {
		wantID, _, wantOK, err := w.oracle(l, cart[l].score)
		if err != nil {
			return err
		}
		r := rs[l]
		switch {
		case r.Promotion != "" && r.Promotion != cart[l].q.Promotion:
			return mismatch(impl, w, &cart[l], "result for "+r.Promotion, cart[l].q.Promotion)
		case !wantOK && !(isNoTier(r.Err) && r.Tier == nil):
			return mismatch(impl, w, &cart[l], fmt.Sprintf("tier=%v err=%v", r.Tier, r.Err), "no tier")
		case wantOK && r.Err != nil:
			return fmt.Errorf("bench: verify: %s line %d: %w", impl, l, r.Err)
		case wantOK && (r.Tier == nil || r.Tier.ID != wantID):
			return mismatch(impl, w, &cart[l], r.Tier, wantID)
		}
	}
	return nil
}
