package cache

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// TestAdvCartAllocEdgeCarts prices carts at the edges of what the
// changed path sizes (no line, one, MaxCartLines, one over, every line on
// one promotion and value, every line refused, a nil cart) on one Cache,
// one after the other, so each reuses the scratch, slab and Pipeliner
// the one before left; each is checked against its lines matched alone.
func TestAdvCartAllocEdgeCarts(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b, Options{})
		long := strings.Repeat("E", gradient.MaxIDLen-1)
		ps := []gradient.Promotion{simplePromotion("ae-one", 1, 3, 9, 27), simplePromotion(long+"1", 2, 4), simplePromotion(long+"2", 5, 6, 7)}
		if _, err := c.Refresh(ctx, ps...); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewSource(3))
		mixed := func(n int) []Query {
			qs := make([]Query, n)
			for i := range qs {
				p := &ps[rng.Intn(len(ps))]
				qs[i] = queryFor(p, rng.Int63n(40))
			}
			return qs
		}
		same := func(n int) []Query {
			qs := make([]Query, n)
			for i := range qs {
				qs[i] = QuantityQuery(long+"2", 6)
			}
			return qs
		}
		refused := func(n int) []Query {
			qs := make([]Query, n)
			for i := range qs {
				qs[i] = QuantityQuery("bad id "+strconv.Itoa(i), 1)
			}
			return qs
		}
		for _, tc := range []struct {
			name    string
			qs      []Query
			invalid bool // the whole cart is refused
		}{
			{"nil cart", nil, false},
			{"empty cart", []Query{}, false},
			{"one line", mixed(1), false},
			{"two lines", mixed(2), false},
			{"MaxCartLines mixed", mixed(MaxCartLines), false},
			{"one line again", mixed(1), false},
			{"MaxCartLines on one promotion and value", same(MaxCartLines), false},
			{"one over MaxCartLines", mixed(MaxCartLines + 1), true},
			{"every line refused", refused(50), false},
			{"three lines", mixed(3), false},
		} {
			for _, opt := range matchOpts {
				name := fmt.Sprintf("%s %+v", tc.name, opt)
				var want []Result
				if !tc.invalid {
					want = advAlone(t, ctx, c, tc.qs, opt)
				}
				rs, err := c.MatchCart(ctx, tc.qs, opt)
				switch {
				case tc.invalid:
					if !errors.Is(err, ErrInvalid) {
						t.Fatalf("%s: %v, want ErrInvalid", name, err)
					}
					continue
				case err != nil:
					t.Fatalf("%s: %v", name, err)
				case rs == nil || len(rs) != len(tc.qs):
					t.Fatalf("%s: %d results (nil %v)", name, len(rs), rs == nil)
				}
				for i := range rs {
					if d := sameResult(rs[i], want[i]); d != "" {
						t.Fatalf("%s line %d: %s", name, i, d)
					}
				}
			}
		}
		// Gifts on results with no tier, and on none.
		if err := c.Gifts(ctx, nil); err != nil {
			t.Errorf("Gifts(nil): %v", err)
		}
		if err := c.Gifts(ctx, []Result{{Promotion: "ae-one"}, {}}); err != nil {
			t.Errorf("Gifts of tierless results: %v", err)
		}
	})
}

// TestAdvCartAllocNoOlderRevision has one goroutine replace a promotion
// with ever newer revisions (the revision is its top tier's threshold)
// while others price carts on it through the pooled scratch and the key
// table: no line of a cart may come from a revision older than one a
// cart that ended before it started had seen.
func TestAdvCartAllocNoOlderRevision(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		for _, near := range []bool{false, true} {
			t.Run("near="+strconv.FormatBool(near), func(t *testing.T) { advNoOlderRevision(t, ctx, b, near) })
		}
	})
}

func advNoOlderRevision(t *testing.T, ctx context.Context, b *testredis.Backend, near bool) {
	t.Helper()
	var c *Cache
	if near {
		c = newNearCache(t, nearClient(t, b), b.Prefix+"-near", Options{})
	} else {
		c = newCacheOn(t, b.Client, b.Prefix+"-redis")
	}
	var carts atomic.Int64
	const id, base = "ae-rev", 1000
	rev := func(r int64) gradient.Promotion { return simplePromotion(id, 1, 2, base+r) }
	if _, err := c.Refresh(ctx, rev(0)); err != nil {
		t.Fatal(err)
	}
	var seen atomic.Int64 // the newest revision a finished cart saw
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for r := int64(1); r <= 60; r++ {
			if _, err := c.Refresh(ctx, rev(r)); err != nil {
				errs <- err.Error()
				return
			}
		}
	}()
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g)))
			for {
				select {
				case <-done:
					return
				default:
				}
				n := 1 + rng.Intn(60)
				qs := make([]Query, n)
				for i := range qs {
					qs[i] = QuantityQuery(id, 1<<40+rng.Int63n(5))
				}
				opt := matchOpts[rng.Intn(len(matchOpts))]
				floor := seen.Load()
				rs, err := c.MatchCart(ctx, qs, opt)
				if err != nil {
					errs <- err.Error()
					return
				}
				carts.Add(1)
				newest := floor
				for i, r := range rs {
					if r.Err != nil && !errors.Is(r.Err, ErrGiftsGone) {
						errs <- fmt.Sprintf("line %d: %v", i, r.Err)
						return
					}
					got := r.Tier.Threshold.IntPart() - base
					if got < floor {
						errs <- fmt.Sprintf("line %d of %d: revision %d after a cart saw %d", i, n, got, floor)
						return
					}
					newest = max(newest, got)
				}
				for {
					old := seen.Load()
					if newest <= old || seen.CompareAndSwap(old, newest) {
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if seen.Load() == 0 || carts.Load() < 10 {
		t.Errorf("%d carts, newest revision seen %d: nothing was tested", carts.Load(), seen.Load())
	}
}
