package cache

import (
	"context"
	"errors"
	"math/rand"
	"strconv"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// advTagPairs finds n pairs of IDs, each starting with base, whose
// ownerTags collide (FNV-1a 32, the function the cart's sort keys on).
func advTagPairs(t *testing.T, base string, n int) [][2]string {
	t.Helper()
	seen := make(map[uint32]string, 1<<18)
	var out [][2]string
	for i := 0; len(out) < n; i++ {
		if i > 1<<23 {
			t.Fatalf("no %d ownerTag collisions under %q", n, base)
		}
		id := base + strconv.Itoa(i)
		tag := ownerTag(id)
		if prev, ok := seen[tag]; ok {
			out = append(out, [2]string{prev, id})
			delete(seen, tag)
			continue
		}
		seen[tag] = id
	}
	return out
}

// advCartWorld is a set of stored promotions (and some that are not)
// that random carts are drawn from.
type advCartWorld struct {
	promos []gradient.Promotion // stored
	absent []string             // valid IDs never stored
	wrong  []string             // IDs whose tiers key holds a string
	bad    []string             // IDs the cache refuses
}

func newAdvCartWorld(t *testing.T, ctx context.Context, c *Cache, b *testredis.Backend, rng *rand.Rand) *advCartWorld {
	t.Helper()
	w := &advCartWorld{
		absent: []string{"adv-absent-1", "adv-absent-2"},
		wrong:  []string{"adv-wrongtype"},
		bad:    []string{"", "a{b}", "sp ace", strings.Repeat("x", gradient.MaxIDLen+1)},
	}
	for _, pair := range advTagPairs(t, "advclash-", 3) {
		for k, id := range pair {
			if k == 0 {
				w.promos = append(w.promos, simplePromotion(id, seq(40)...))
			} else {
				w.promos = append(w.promos, randPromotion(rng, id, gradient.Amount, 20))
			}
		}
	}
	for i := range 8 {
		metric := gradient.Quantity
		if i%2 == 1 {
			metric = gradient.Amount
		}
		w.promos = append(w.promos, randPromotion(rng, "advr-"+strconv.Itoa(i), metric, 1+rng.Intn(60)))
	}
	w.promos = append(w.promos, simplePromotion("adv-dense", seq(64)...), simplePromotion("adv-sparse", 5, 50, 500))
	if _, err := c.Refresh(ctx, w.promos...); err != nil {
		t.Fatal(err)
	}
	for _, id := range w.wrong {
		if err := b.Client.Set(ctx, c.tiersKey(id), "not a zset", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// cart draws a random cart of up to max lines: most lines on a few
// promotions, close together (so they group), some duplicates, some
// far apart, some absent, wrong-typed, refused or of the wrong metric.
func (w *advCartWorld) cart(rng *rand.Rand, maxN int) []Query {
	n := rng.Intn(maxN + 1)
	hot := rng.Perm(len(w.promos))[:1+rng.Intn(4)]
	qs := make([]Query, 0, n)
	for len(qs) < n {
		switch k := rng.Intn(20); {
		case k == 0:
			qs = append(qs, QuantityQuery(w.absent[rng.Intn(len(w.absent))], rng.Int63n(100)))
		case k == 1:
			qs = append(qs, QuantityQuery(w.wrong[rng.Intn(len(w.wrong))], rng.Int63n(100)))
		case k == 2:
			qs = append(qs, QuantityQuery(w.bad[rng.Intn(len(w.bad))], rng.Int63n(100)))
		case k == 3 && len(qs) > 0:
			qs = append(qs, qs[rng.Intn(len(qs))]) // a duplicate line
		case k == 4:
			p := &w.promos[rng.Intn(len(w.promos))]
			q := queryFor(p, rng.Int63n(100))
			switch rng.Intn(3) {
			case 0:
				q.Metric = 3 - q.Metric // the other metric (or an unknown one)
			case 1:
				q.Value = decimal.NewFromInt(-1 - rng.Int63n(5))
			default:
				q.Value = decimal.New(rng.Int63n(100000), -3) // floored to cents
			}
			qs = append(qs, q)
		default:
			var p *gradient.Promotion
			if k < 16 {
				p = &w.promos[hot[rng.Intn(len(hot))]]
			} else {
				p = &w.promos[rng.Intn(len(w.promos))]
			}
			sc := p.Tiers[rng.Intn(len(p.Tiers))].Threshold
			base := sc.IntPart()
			if p.Metric == gradient.Amount {
				base = sc.Shift(2).IntPart()
			}
			s := max(0, base+rng.Int63n(80)-40)
			if rng.Intn(10) == 0 {
				s = rng.Int63n(1 << 20)
			}
			qs = append(qs, queryFor(p, s))
		}
	}
	return qs
}

// advAlone is every line of qs matched alone, with Match.
func advAlone(t *testing.T, ctx context.Context, c *Cache, qs []Query, opt MatchOptions) []Result {
	t.Helper()
	want := make([]Result, len(qs))
	for i, q := range qs {
		r, err := c.Match(ctx, q, opt)
		if err != nil && err != r.Err {
			t.Fatalf("Match %+v: %v", q, err)
		}
		want[i] = r
	}
	return want
}

// TestAdvCartGroupDifferential prices random carts of up to 1,000 lines
// (grouped lines, duplicates, promotions whose IDs share an ownerTag,
// absent, wrong-typed and refused IDs, both metrics) with each of the
// MatchOptions, appending into a reused slice with a kept prefix and
// stale spare capacity, and checks every line against Match alone.
func TestAdvCartGroupDifferential(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		rng := rand.New(rand.NewSource(int64(len(b.Name))*7919 + 11))
		c := newCache(t, b, Options{})
		w := newAdvCartWorld(t, ctx, c, b, rng)
		stale := Result{Promotion: "stale", Tier: &TierHit{ID: "stale"}, Next: &TierHit{ID: "stale"}, Version: "stale", Shortfall: decimal.NewFromInt(9)}
		buf := make([]Result, 0, 8)
		seen := map[string]int{}
		t.Cleanup(func() {
			for _, k := range []string{"WRONGTYPE", "hit", "clash", "invalid", "not found"} {
				if seen[k] == 0 {
					t.Errorf("no line of kind %q: %v", k, seen)
				}
			}
		})
		for round := range 24 {
			maxLines := 40
			if round%4 == 0 {
				maxLines = MaxCartLines
			}
			qs := w.cart(rng, maxLines)
			opt := matchOpts[round%len(matchOpts)]
			// Fill the spare capacity with a stale Result and keep one
			// line before the cart's.
			buf = buf[:cap(buf)]
			for i := range buf {
				buf[i] = stale
			}
			buf = append(buf[:1], stale)[:1]
			got, err := c.AppendMatchCart(ctx, buf, qs, opt)
			if err != nil {
				t.Fatalf("round %d %+v: %v", round, opt, err)
			}
			if len(got) != 1+len(qs) || got[0].Promotion != "stale" {
				t.Fatalf("round %d: %d results (want %d), dst[0] %q", round, len(got), 1+len(qs), got[0].Promotion)
			}
			want := advAlone(t, ctx, c, qs, opt)
			for i := range qs {
				switch r := got[1+i]; {
				case r.Err == nil:
					seen["hit"]++
					if strings.HasPrefix(r.Promotion, "advclash-") {
						seen["clash"]++
					}
				case strings.Contains(r.Err.Error(), "WRONGTYPE"):
					seen["WRONGTYPE"]++
				case errors.Is(r.Err, ErrInvalid):
					seen["invalid"]++
				case errors.Is(r.Err, ErrNotFound):
					seen["not found"]++
				}
				if d := sameResult(got[1+i], want[i]); d != "" {
					t.Fatalf("round %d %+v line %d of %d (%+v): %s", round, opt, i, len(qs), qs[i], d)
				}
				if opt.Gifts && got[1+i].Tier != nil && want[i].Tier != nil && len(got[1+i].Tier.Gifts) != len(want[i].Tier.Gifts) {
					t.Fatalf("round %d line %d: %d gifts, want %d", round, i, len(got[1+i].Tier.Gifts), len(want[i].Tier.Gifts))
				}
			}
			buf = got
		}
	})
}
