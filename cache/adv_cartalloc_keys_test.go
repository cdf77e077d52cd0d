package cache

import (
	"context"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// akSameSet returns n IDs under base whose ownerTags pick one set of the
// key table (and, when tag, exactly one ownerTag pair among them is
// added by the caller): a set of keyWays ways held by more promotions
// than it has ways evicts on every other line.
func akSameSet(t *testing.T, base string, n int) []string {
	t.Helper()
	set := func(id string) uint32 { tag := ownerTag(id); return (tag ^ tag>>16) % keySets }
	want := set(base + "0")
	out := []string{base + "0"}
	for i := 1; len(out) < n; i++ {
		if i > 1<<22 {
			t.Fatalf("no %d IDs of one key set under %q", n, base)
		}
		if id := base + strconv.Itoa(i); set(id) == want {
			out = append(out, id)
		}
	}
	return out
}

// akWorld is promotions each of one tier whose threshold names it, so a
// line answered from another promotion's key shows at once.
type akWorld struct {
	ids  []string
	th   map[string]int64 // the one tier's threshold, by ID
	vers map[string]string
}

func newAKWorld(t *testing.T, ctx context.Context, c *Cache, ids []string, base int64) *akWorld {
	t.Helper()
	w := &akWorld{ids: ids, th: make(map[string]int64, len(ids)), vers: make(map[string]string, len(ids))}
	ps := make([]gradient.Promotion, len(ids))
	for i, id := range ids {
		w.th[id] = base + int64(i) + 1
		ps[i] = simplePromotion(id, w.th[id])
		v, err := Version(&ps[i], Options{})
		if err != nil {
			t.Fatal(err)
		}
		w.vers[id] = v
	}
	for lo := 0; lo < len(ps); lo += 500 {
		if _, err := c.Refresh(ctx, ps[lo:min(lo+500, len(ps))]...); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// cart draws n lines over w's IDs (repeats allowed), each far above its
// promotion's one threshold.
func (w *akWorld) cart(rng *rand.Rand, n int) []Query {
	qs := make([]Query, n)
	for i := range qs {
		qs[i] = QuantityQuery(w.ids[rng.Intn(len(w.ids))], 1<<30+rng.Int63n(1000))
	}
	return qs
}

// check returns what is wrong with rs as the answers to qs.
func (w *akWorld) check(qs []Query, rs []Result) string {
	if len(rs) != len(qs) {
		return fmt.Sprintf("%d results for %d lines", len(rs), len(qs))
	}
	for i, r := range rs {
		id := qs[i].Promotion
		switch {
		case r.Err != nil:
			return fmt.Sprintf("line %d %s: %v", i, id, r.Err)
		case r.Promotion != id || r.Tier == nil || r.Version != w.vers[id]:
			return fmt.Sprintf("line %d %s: got %+v", i, id, r)
		case !r.Tier.Threshold.Equal(decimal.NewFromInt(w.th[id])):
			return fmt.Sprintf("line %d %s: threshold %s, want %d (another promotion's key?)", i, id, r.Tier.Threshold, w.th[id])
		}
	}
	return ""
}

// TestAdvCartAllocKeyTable prices carts from many goroutines at once on
// one Cache over promotion sets built to stress the table of tiers keys:
// more promotions than it holds (evictions on every cart), many IDs of
// one set (a way replaced while another goroutine reads it), pairs
// sharing an ownerTag, IDs of MaxIDLen differing in their last byte, and
// one new ID first used by every goroutine at once. Every line must be
// answered from its own promotion's key.
func TestAdvCartAllocKeyTable(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		long := func(n int) []string {
			out := make([]string, n)
			for i := range out {
				s := strconv.Itoa(i)
				out[i] = strings.Repeat("L", gradient.MaxIDLen-len(s)) + s
			}
			return out
		}
		pairs := func() []string {
			var out []string
			for _, p := range advTagPairs(t, "aktag-", 6) {
				out = append(out, p[0], p[1])
			}
			return out
		}
		for _, tc := range []struct {
			name  string
			ids   func() []string
			lines int
		}{
			{"more promotions than keys", func() []string {
				out := make([]string, keySets*keyWays+200)
				for i := range out {
					out[i] = "akevict-" + strconv.Itoa(i)
				}
				return out
			}, 400},
			{"one set, thrice its ways", func() []string { return akSameSet(t, "akset-", 3*keyWays) }, 60},
			{"ownerTag pairs", pairs, 60},
			{"one set and a shared ownerTag", func() []string { return append(akSameSet(t, "akmix-", keyWays+1), pairs()[:4]...) }, 40},
			{"IDs of MaxIDLen", func() []string { return long(40) }, 80},
			{"single lines", func() []string { return akSameSet(t, "aksingle-", 2*keyWays) }, 1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c := newCache(t, b, Options{})
				w := newAKWorld(t, ctx, c, tc.ids(), 0)
				const workers, rounds = 8, 12
				var wg sync.WaitGroup
				errs := make(chan string, workers)
				for g := range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						rng := rand.New(rand.NewSource(int64(g)*31 + int64(len(tc.name))))
						for range rounds {
							qs := w.cart(rng, 1+rng.Intn(tc.lines))
							rs, err := c.MatchCart(ctx, qs, MatchOptions{Next: rng.Intn(2) == 0})
							if err != nil {
								errs <- err.Error()
								return
							}
							if d := w.check(qs, rs); d != "" {
								errs <- d
								return
							}
						}
					}()
				}
				wg.Wait()
				close(errs)
				for e := range errs {
					t.Error(e)
				}
			})
		}
	})
}

// TestAdvCartAllocKeyTableFirstUse has every goroutine price its first
// cart of new promotions at the same moment, on a fresh Cache and on
// two Caches of two prefixes over one client that store the same IDs
// with other thresholds: no Cache may send another's key.
func TestAdvCartAllocKeyTableFirstUse(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		ids := akSameSet(t, "akfirst-", 2*keyWays)
		for _, tc := range []struct {
			name   string
			caches int
		}{
			{"one cache", 1},
			{"two prefixes on one client", 2},
		} {
			t.Run(tc.name, func(t *testing.T) {
				cs := make([]*Cache, tc.caches)
				ws := make([]*akWorld, tc.caches)
				for k := range cs {
					cs[k] = newCacheOn(t, b.Client, b.Prefix+"-"+strings.ReplaceAll(tc.name, " ", "")+strconv.Itoa(k))
					ws[k] = newAKWorld(t, ctx, cs[k], ids, int64(1000*k))
				}
				const workers = 12
				var start, wg sync.WaitGroup
				start.Add(1)
				errs := make(chan string, workers)
				for g := range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						rng := rand.New(rand.NewSource(int64(g) + 5))
						k := g % tc.caches
						start.Wait()
						for range 10 {
							qs := ws[k].cart(rng, 1+rng.Intn(30))
							rs, err := cs[k].MatchCart(ctx, qs, MatchOptions{})
							if err != nil {
								errs <- err.Error()
								return
							}
							if d := ws[k].check(qs, rs); d != "" {
								errs <- fmt.Sprintf("cache %d: %s", k, d)
								return
							}
						}
					}()
				}
				start.Done()
				wg.Wait()
				close(errs)
				for e := range errs {
					t.Error(e)
				}
			})
		}
	})
}
