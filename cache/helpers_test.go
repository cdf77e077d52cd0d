package cache

import (
	"context"
	"fmt"
	"math/rand"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

func testCtx(t testing.TB) context.Context { return testredis.Ctx(t) }

func newCache(t testing.TB, b *testredis.Backend, opts Options) *Cache {
	t.Helper()
	opts.Prefix = b.Prefix
	c, err := New(b.Client, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// randPromotion builds a valid promotion with n tiers: quantity or amount
// (with cents), random rewards, gifts on some tiers.
func randPromotion(rng *rand.Rand, id string, metric gradient.Metric, n int) gradient.Promotion {
	p := gradient.Promotion{ID: id, Metric: metric, MinorDigits: 2}
	used := map[int64]bool{}
	for i := 0; i < n; i++ {
		var s int64
		for {
			s = 1 + rng.Int63n(int64(n)*50+10)
			if !used[s] {
				break
			}
		}
		used[s] = true
		var th decimal.Decimal
		if metric == gradient.Quantity {
			th = decimal.NewFromInt(s)
		} else {
			th = decimal.New(s, -2)
		}
		t := gradient.Tier{ID: "t" + strconv.Itoa(i), Threshold: th}
		switch rng.Intn(4) {
		case 0:
			t.Reward = gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.New(int64(1+rng.Intn(9999)), -2)}
		case 1:
			t.Reward = gradient.Reward{Kind: gradient.AmountOff, Amount: decimal.New(int64(1+rng.Intn(100000)), -2), Cap: decimal.NewFromInt(500)}
		case 2:
			t.Reward = gradient.Reward{Kind: gradient.FixedPrice, Amount: decimal.New(int64(rng.Intn(100000)), -2)}
		default:
			t.Reward = gradient.Reward{Kind: gradient.EveryN, Amount: decimal.NewFromInt(10), Step: decimal.NewFromInt(100)}
		}
		if rng.Intn(3) == 0 {
			for g := 0; g <= rng.Intn(3); g++ {
				t.Gifts = append(t.Gifts, gradient.Gift{SKU: fmt.Sprintf("sku-%d-%d", i, g), Qty: 1 + rng.Intn(5), Name: "gift 礼品 " + strconv.Itoa(g)})
			}
		}
		p.Tiers = append(p.Tiers, t)
	}
	return p
}

func simplePromotion(id string, thresholds ...int64) gradient.Promotion {
	p := gradient.Promotion{ID: id, Metric: gradient.Quantity, MinorDigits: 2}
	for i, th := range thresholds {
		p.Tiers = append(p.Tiers, gradient.Tier{
			ID:        "tier" + strconv.Itoa(i),
			Threshold: decimal.NewFromInt(th),
			Reward:    gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(int64(1 + i%100))},
			Gifts:     []gradient.Gift{{SKU: "gift-" + strconv.Itoa(i), Qty: 1 + i%5, Name: "g" + strconv.Itoa(i)}},
		})
	}
	return p
}

// boundaryValues returns query scores around every threshold of m.
func boundaryValues(m *gradient.Matcher, rng *rand.Rand, extra int) []int64 {
	sc := m.Scores()
	vals := []int64{0, sc[0] - 1, sc[0], sc[len(sc)-1], sc[len(sc)-1] + 1, sc[len(sc)-1] * 3}
	for k := 0; k < extra && len(sc) > 0; k++ {
		s := sc[rng.Intn(len(sc))]
		vals = append(vals, s, s-1, s+1)
	}
	out := vals[:0]
	for _, v := range vals {
		if v >= 0 {
			out = append(out, v)
		}
	}
	return out
}

func queryFor(p *gradient.Promotion, s int64) Query {
	if p.Metric == gradient.Quantity {
		return QuantityQuery(p.ID, s)
	}
	return AmountQuery(p.ID, decimal.New(s, -int32(p.MinorDigits)))
}

// checkAgainstOracle compares one Result with the matcher's answer.
func checkAgainstOracle(t *testing.T, m *gradient.Matcher, s int64, r Result, withNext bool) {
	t.Helper()
	want, werr := m.MatchScore(s)
	if werr != nil {
		if !errorsIs(r.Err, ErrNoTier) || !errorsIs(r.Err, gradient.ErrNoTier) || r.Tier != nil {
			t.Fatalf("score %d: want no tier, got tier %+v err %v", s, r.Tier, r.Err)
		}
	} else {
		if r.Err != nil || r.Tier == nil {
			t.Fatalf("score %d: want tier %s, got err %v", s, want.Tier.ID, r.Err)
		}
		if r.Tier.ID != want.Tier.ID || r.Tier.Score != want.Score || !r.Tier.Reward.Percent.Equal(want.Tier.Reward.Percent) ||
			!r.Tier.Reward.Amount.Equal(want.Tier.Reward.Amount) || r.Tier.Reward.Kind != want.Tier.Reward.Kind ||
			!r.Tier.Reward.Cap.Equal(want.Tier.Reward.Cap) || !r.Tier.Reward.Step.Equal(want.Tier.Reward.Step) ||
			r.Tier.HasGifts != (len(want.Tier.Gifts) > 0) {
			t.Fatalf("score %d: got %+v, want %+v (score %d)", s, r.Tier, want.Tier, want.Score)
		}
		if !r.Tier.Threshold.Equal(m.Promotion().ScoreValue(want.Score)) {
			t.Fatalf("score %d: threshold %s", s, r.Tier.Threshold)
		}
	}
	if !withNext {
		if r.Next != nil {
			t.Fatalf("score %d: Next without MatchOptions.Next", s)
		}
		return
	}
	switch {
	case want.Next == nil && r.Next != nil:
		t.Fatalf("score %d: want no next, got %s", s, r.Next.ID)
	case want.Next != nil && (r.Next == nil || r.Next.ID != want.Next.ID || r.Next.Score != want.NextScore):
		t.Fatalf("score %d: want next %s, got %+v", s, want.Next.ID, r.Next)
	case want.Next != nil && !r.Shortfall.Equal(want.Shortfall):
		t.Fatalf("score %d: shortfall %s, want %s", s, r.Shortfall, want.Shortfall)
	}
}

type countingObserver struct {
	NopObserver
	lookups, hits, noTier, notFound, notActive, errs atomic.Int64
	roundTrips, decodeErrors                         atomic.Int64
	refreshes                                        [16]atomic.Int64
	// byOp, near and loads are indexed by Op, NearEvent and LoadOutcome.
	byOp, near, loads [8]atomic.Int64
	// refreshCalls counts OnRefreshDone; refreshN and refreshErrs sum its
	// promotion counts and count its errors.
	refreshCalls, refreshN, refreshErrs atomic.Int64
}

func (o *countingObserver) OnLookup(_ string, out Outcome, _ time.Duration) {
	o.lookups.Add(1)
	switch out {
	case OutcomeHit:
		o.hits.Add(1)
	case OutcomeNoTier:
		o.noTier.Add(1)
	case OutcomeNotFound:
		o.notFound.Add(1)
	case OutcomeNotActive:
		o.notActive.Add(1)
	default:
		o.errs.Add(1)
	}
}
func (o *countingObserver) OnRoundTrips(op Op, n int) {
	o.roundTrips.Add(int64(n))
	o.byOp[op].Add(int64(n))
}
func (o *countingObserver) OnNear(_ string, ev NearEvent)                     { o.near[ev].Add(1) }
func (o *countingObserver) OnLoad(_ string, how LoadOutcome, _ time.Duration) { o.loads[how].Add(1) }
func (o *countingObserver) OnRefreshDone(n int, _ time.Duration, err error) {
	o.refreshCalls.Add(1)
	o.refreshN.Add(int64(n))
	if err != nil {
		o.refreshErrs.Add(1)
	}
}
func (o *countingObserver) OnRefresh(_ string, out RefreshOutcome) { o.refreshes[out].Add(1) }
func (o *countingObserver) OnDecodeError(string, string, error)    { o.decodeErrors.Add(1) }

// loadCounts is the OnLoad calls so far by outcome, for failure messages.
func (o *countingObserver) loadCounts() map[LoadOutcome]int64 {
	m := map[LoadOutcome]int64{}
	for i := range o.loads {
		if n := o.loads[i].Load(); n != 0 {
			m[LoadOutcome(i)] = n
		}
	}
	return m
}

// newCacheOn is newCache on another client of the same backend.
func newCacheOn(t testing.TB, client redis.UniversalClient, prefix string) *Cache {
	t.Helper()
	c, err := New(client, Options{Prefix: prefix})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}
