package tierset_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/soak"
	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/score"
)

// randomPromotion builds a promotion with n distinct thresholds: counts for
// Quantity, amounts with cents for Amount. Every third tier carries gifts.
func randomPromotion(rng *rand.Rand, id string, metric gradient.Metric, n int, version int) gradient.Promotion {
	p := gradient.Promotion{ID: id, Metric: metric, MinorDigits: 2}
	seen := make(map[int64]bool, n)
	span := int64(n) * 50
	for len(p.Tiers) < n {
		s := 1 + rng.Int64N(span)
		if seen[s] {
			continue
		}
		seen[s] = true
		i := len(p.Tiers)
		t := gradient.Tier{
			ID:     fmt.Sprintf("v%d-t%d", version, i),
			Reward: gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(int64(1 + rng.IntN(90)))},
		}
		if metric == gradient.Quantity {
			t.Threshold = decimal.NewFromInt(s)
		} else {
			t.Threshold = score.MinorToAmount(s, 2) // e.g. 123.45
		}
		if i%3 == 0 {
			t.Gifts = []gradient.Gift{{SKU: fmt.Sprintf("gift-%d-%d", version, i), Qty: 1 + i%4, Name: "Gift " + strconv.Itoa(i)}}
		}
		p.Tiers = append(p.Tiers, t)
	}
	return p
}

// queryValues returns values that hit every interesting boundary of m:
// exactly at each of a sample of thresholds, one minor unit below, below
// the lowest, above the highest, plus uniform random values.
func queryValues(rng *rand.Rand, m *gradient.Matcher, random int) []int64 {
	scores := m.Scores()
	out := []int64{0, scores[0] - 1, scores[0], scores[len(scores)-1], scores[len(scores)-1] + 1, score.MaxExact / 1000}
	for i := 0; i < 200; i++ {
		s := scores[rng.IntN(len(scores))]
		out = append(out, s, s-1, s+1)
	}
	top := scores[len(scores)-1] + 100
	for i := 0; i < random; i++ {
		out = append(out, rng.Int64N(top))
	}
	return out
}

func valueOf(p *gradient.Promotion, s int64) decimal.Decimal { return p.ScoreValue(s) }

func query(p *gradient.Promotion, s int64) cache.Query {
	return cache.Query{Promotion: p.ID, Metric: p.Metric, Value: valueOf(p, s)}
}

// checkAgainstOracle runs every value through Match and MatchCart and
// compares tier, next tier, shortfall and gifts with the in-memory matcher.
func checkAgainstOracle(t *testing.T, ctx context.Context, c *cache.Cache, m *gradient.Matcher, values []int64) int {
	t.Helper()
	p := m.Promotion()
	opt := cache.MatchOptions{Next: true, Gifts: true}
	checked := 0
	for start := 0; start < len(values); start += 100 {
		end := min(start+100, len(values))
		qs := make([]cache.Query, 0, end-start)
		for _, v := range values[start:end] {
			qs = append(qs, query(p, v))
		}
		results, err := c.MatchCart(ctx, qs, opt)
		if err != nil {
			t.Fatalf("MatchCart: %v", err)
		}
		for i, v := range values[start:end] {
			compare(t, m, v, results[i])
			checked++
		}
	}
	// Single matches take the same path as a one-line cart; spot-check them.
	for _, v := range values[:min(50, len(values))] {
		r, err := c.Match(ctx, query(p, v), opt)
		if err != nil && !errors.Is(err, cache.ErrNoTier) {
			t.Fatalf("Match(%d): %v", v, err)
		}
		if r.Err == nil {
			r.Err = err
		}
		compare(t, m, v, r)
		checked++
	}
	return checked
}

func compare(t *testing.T, m *gradient.Matcher, v int64, r cache.Result) {
	t.Helper()
	want, werr := m.MatchScore(v)
	if werr != nil {
		if !errors.Is(r.Err, cache.ErrNoTier) {
			t.Fatalf("%s value %d: oracle says no tier, cache says tier %v err %v", m.Promotion().ID, v, hitID(r.Tier), r.Err)
		}
	} else {
		if r.Err != nil {
			t.Fatalf("%s value %d: cache err %v, oracle hit %s", m.Promotion().ID, v, r.Err, want.Tier.ID)
		}
		if r.Tier == nil || r.Tier.ID != want.Tier.ID || r.Tier.Score != want.Score {
			t.Fatalf("%s value %d: cache hit %v, oracle %s@%d", m.Promotion().ID, v, r.Tier, want.Tier.ID, want.Score)
		}
		if len(r.Tier.Gifts) != len(want.Tier.Gifts) {
			t.Fatalf("%s value %d: %d gifts, want %d", m.Promotion().ID, v, len(r.Tier.Gifts), len(want.Tier.Gifts))
		}
		for i := range want.Tier.Gifts {
			if r.Tier.Gifts[i] != want.Tier.Gifts[i] {
				t.Fatalf("%s value %d: gift %d = %+v, want %+v", m.Promotion().ID, v, i, r.Tier.Gifts[i], want.Tier.Gifts[i])
			}
		}
		if !r.Tier.Reward.Percent.Equal(want.Tier.Reward.Percent) {
			t.Fatalf("%s value %d: reward %v, want %v", m.Promotion().ID, v, r.Tier.Reward, want.Tier.Reward)
		}
	}
	if hitID(r.Next) != tierID(want.Next) {
		t.Fatalf("%s value %d: next %q, oracle %q", m.Promotion().ID, v, hitID(r.Next), tierID(want.Next))
	}
	if want.Next != nil && !r.Shortfall.Equal(want.Shortfall) {
		t.Fatalf("%s value %d: shortfall %s, oracle %s", m.Promotion().ID, v, r.Shortfall, want.Shortfall)
	}
}

func hitID(h *cache.TierHit) string {
	if h == nil {
		return ""
	}
	return h.ID
}

func tierID(t *gradient.Tier) string {
	if t == nil {
		return ""
	}
	return t.ID
}

// TestEndToEndAgainstOracle warms random promotions (3 to 3000 tiers, both
// metrics), checks thousands of queries against the in-memory oracle,
// refreshes every promotion to a new version and checks again, then
// deletes them and checks they are gone.
func TestEndToEndAgainstOracle(t *testing.T) {
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
		ctx := context.Background()
		c, err := cache.New(b.Client, cache.Options{Prefix: b.Prefix})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(7, 11))
		sizes := []int{3, 17, 300, 3000}
		if !b.Real() {
			// miniredis walks a sorted set per query: 3,000 tiers cost it
			// seconds, real Redis a fraction of one.
			sizes = soak.Pick(sizes, sizes[:3])
		}
		var promos []gradient.Promotion
		for i, n := range sizes {
			for _, metric := range []gradient.Metric{gradient.Quantity, gradient.Amount} {
				promos = append(promos, randomPromotion(rng, fmt.Sprintf("e2e-%s-%d-%d", metric, n, i), metric, n, 1))
			}
		}
		for version := 1; version <= 2; version++ {
			if version == 2 {
				for i := range promos {
					promos[i] = randomPromotion(rng, promos[i].ID, promos[i].Metric, sizes[i/2]+rng.IntN(5), 2)
				}
			}
			if _, err := c.Refresh(ctx, promos...); err != nil {
				t.Fatalf("refresh v%d: %v", version, err)
			}
			checked := 0
			for _, p := range promos {
				m, err := gradient.NewMatcher(p)
				if err != nil {
					t.Fatal(err)
				}
				checked += checkAgainstOracle(t, ctx, c, m, queryValues(rng, m, 300))
			}
			t.Logf("v%d: %d queries matched the oracle over %d promotions", version, checked, len(promos))
			if checked < 5000 {
				t.Fatalf("only %d queries checked", checked)
			}
		}
		for _, p := range promos {
			if res, err := c.Delete(ctx, p.ID, 0); err != nil || res.Outcome != cache.Deleted {
				t.Fatalf("Delete(%s) = %+v, %v", p.ID, res, err)
			}
			_, err := c.Match(ctx, cache.Query{Promotion: p.ID, Metric: p.Metric, Value: decimal.NewFromInt(5)}, cache.MatchOptions{})
			if !errors.Is(err, cache.ErrNotFound) {
				t.Fatalf("match after delete: %v", err)
			}
		}
		if b.Real() {
			// Old gift versions linger for the grace period by design; the
			// tiers and metadata must be gone at once.
			keys, err := testredis.Keys(ctx, b.Client, b.Prefix)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if ttl := b.Client.PTTL(ctx, k).Val(); ttl < 0 {
					t.Errorf("key %s survived delete without a TTL (%v)", k, ttl)
				}
			}
		}
	})
}

// TestNoMixedReadsDuringRefresh: 8 readers match and fetch gifts while a
// writer refreshes one promotion 100 times between two versions whose
// tiers and gifts differ. Every read must be wholly one version.
func TestNoMixedReadsDuringRefresh(t *testing.T) {
	testredis.EachReal(t, func(t *testing.T, b *testredis.Backend) {
		ctx := context.Background()
		c, err := cache.New(b.Client, cache.Options{Prefix: b.Prefix})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(3, 5))
		versions := []gradient.Promotion{
			randomPromotion(rng, "mixed", gradient.Amount, 300, 1),
			randomPromotion(rng, "mixed", gradient.Amount, 300, 2),
		}
		matchers := make([]*gradient.Matcher, 2)
		for i, p := range versions {
			if matchers[i], err = gradient.NewMatcher(p); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Refresh(ctx, versions[0]); err != nil {
			t.Fatal(err)
		}
		top := matchers[0].Scores()[299] + 100
		var reads, mixed atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for r := 0; r < 8; r++ {
			wg.Add(1)
			go func(seed uint64) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, 1))
				for {
					select {
					case <-stop:
						return
					default:
					}
					v := rng.Int64N(top)
					res, err := c.Match(ctx, query(&versions[0], v), cache.MatchOptions{Next: true, Gifts: true})
					if err != nil && !errors.Is(err, cache.ErrNoTier) {
						errs <- err
						return
					}
					reads.Add(1)
					if !consistentWithOneVersion(matchers, v, res, err) {
						mixed.Add(1)
					}
				}
			}(uint64(r))
		}
		for i := 0; i < 100; i++ {
			if _, err := c.Refresh(ctx, versions[(i+1)%2]); err != nil {
				close(stop)
				wg.Wait()
				t.Fatalf("refresh %d: %v", i, err)
			}
		}
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("reader: %v", err)
		}
		t.Logf("%d reads during 100 refreshes, %d mixed", reads.Load(), mixed.Load())
		if reads.Load() < 100 {
			t.Errorf("only %d reads", reads.Load())
		}
		if mixed.Load() != 0 {
			t.Errorf("%d mixed reads", mixed.Load())
		}
	})
}

// consistentWithOneVersion reports whether hit, next and gifts all agree
// with the oracle of one single version.
func consistentWithOneVersion(ms []*gradient.Matcher, v int64, r cache.Result, err error) bool {
	if r.Err == nil {
		r.Err = err
	}
	for _, m := range ms {
		want, werr := m.MatchScore(v)
		if (werr != nil) != (r.Err != nil) {
			continue
		}
		if werr == nil {
			if r.Tier == nil || r.Tier.ID != want.Tier.ID || len(r.Tier.Gifts) != len(want.Tier.Gifts) {
				continue
			}
			same := true
			for i := range want.Tier.Gifts {
				same = same && r.Tier.Gifts[i] == want.Tier.Gifts[i]
			}
			if !same {
				continue
			}
		}
		if hitID(r.Next) != tierID(want.Next) {
			continue
		}
		return true
	}
	return false
}

// TestWindowEndToEnd: a promotion warmed before its sale starts answers
// "not active" until Start, hits inside the window, and is "not active"
// again from End, by the injected clock.
func TestWindowEndToEnd(t *testing.T) {
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
		ctx := context.Background()
		start := time.Now().Add(time.Hour).Truncate(time.Second)
		var now atomic.Int64
		now.Store(start.Add(-time.Minute).UnixNano())
		c, err := cache.New(b.Client, cache.Options{Prefix: b.Prefix, Now: func() time.Time { return time.Unix(0, now.Load()) }})
		if err != nil {
			t.Fatal(err)
		}
		p := randomPromotion(rand.New(rand.NewPCG(1, 1)), "sale", gradient.Quantity, 3, 1)
		p.Start, p.End = start, start.Add(2*time.Hour)
		if _, err := c.Refresh(ctx, p); err != nil {
			t.Fatal(err)
		}
		q := cache.Query{Promotion: p.ID, Metric: p.Metric, Value: decimal.NewFromInt(1 << 20)}
		steps := []struct {
			at   time.Time
			want error
		}{
			{start.Add(-time.Minute), cache.ErrNotActive},
			{start, nil},
			{start.Add(90 * time.Minute), nil},
			{start.Add(2 * time.Hour), cache.ErrNotActive},
		}
		for _, s := range steps {
			now.Store(s.at.UnixNano())
			_, err := c.Match(ctx, q, cache.MatchOptions{})
			if !errors.Is(err, s.want) {
				t.Errorf("at %v: err %v, want %v", s.at, err, s.want)
			}
		}
	})
}
