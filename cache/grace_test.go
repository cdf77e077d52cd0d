package cache

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/soak"
	"github.com/tierset/tierset/internal/testredis"
)

// TestDeleteGrace: 8 readers match with Next and Gifts while a writer cycles
// Refresh v1, Delete, Refresh v2, Delete (400 writes, 200 without the soak
// switch, well within Grace).
// A reader that got a tier always gets its gifts: tiers without gifts
// (ErrGiftsGone), false damage and mixed reads are counted and must be 0;
// between a Delete and the next Refresh readers see ErrNotFound.
func TestDeleteGrace(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b, Options{Grace: 10 * time.Minute})
		v1, v2 := versioned("v1", 2, 4, 6, 8), versioned("v2", 3, 5, 7, 9, 11)
		oracle := map[string]*gradient.Matcher{}
		tags := map[string]string{}
		for _, p := range []gradient.Promotion{v1, v2} {
			v, err := Version(&p, Options{})
			if err != nil {
				t.Fatal(err)
			}
			oracle[v], _ = gradient.NewMatcher(p)
			tags[v] = p.Tiers[0].ID[:2]
		}
		if _, err := c.Refresh(ctx, v1); err != nil {
			t.Fatal(err)
		}
		var hits, notFound, noGifts, damage, mixed, other atomic.Int64
		stop := make(chan struct{})
		wg := untilStopped(8, stop, func(r, k int) bool {
			qs := []Query{QuantityQuery("flip", int64(2+k%11)), QuantityQuery("flip", int64(2+(k+r)%11))}
			rs, err := c.MatchCart(ctx, qs, MatchOptions{Next: true, Gifts: true})
			if err != nil {
				t.Errorf("reader %d: %v", r, err)
				return false
			}
			for i, res := range rs {
				switch {
				case errors.Is(res.Err, ErrNotFound):
					notFound.Add(1)
				case errors.Is(res.Err, ErrGiftsGone):
					noGifts.Add(1)
				case errors.Is(res.Err, ErrDamaged):
					damage.Add(1)
				case checkWhole(oracle, tags, qs[i], res) != "":
					mixed.Add(1)
					t.Errorf("reader %d: %s", r, checkWhole(oracle, tags, qs[i], res))
				case res.Err == nil:
					hits.Add(1)
				case !errors.Is(res.Err, ErrNoTier):
					other.Add(1)
					t.Errorf("reader %d: %v", r, res.Err)
				}
			}
			return true
		})
		start := time.Now()
		rounds := soak.Pick(100, 50)
		for i := 0; i < rounds; i++ {
			for _, p := range []gradient.Promotion{v1, v2} {
				if _, err := c.Refresh(ctx, p); err != nil {
					t.Errorf("refresh: %v", err)
				}
				if res, err := c.Delete(ctx, p.ID, 0); err != nil || res.Outcome != Deleted {
					t.Errorf("delete: %+v %v", res, err)
				}
			}
		}
		elapsed := time.Since(start)
		close(stop)
		wg.Wait()
		t.Logf("%d writes in %v: %d hits with gifts, %d not found, %d tiers without gifts, %d damaged, %d mixed, %d other",
			4*rounds, elapsed.Round(time.Millisecond), hits.Load(), notFound.Load(), noGifts.Load(), damage.Load(), mixed.Load(), other.Load())
		if noGifts.Load() != 0 || damage.Load() != 0 || mixed.Load() != 0 || other.Load() != 0 {
			t.Fatal("a reader got a tier without its gifts, false damage, or a mixed read")
		}
		if hits.Load() < 100 || notFound.Load() == 0 {
			t.Fatalf("readers did not overlap the writes: %d hits, %d not found", hits.Load(), notFound.Load())
		}
	})
}

// TestDeleteGiftsExpire: after Delete, the gift lists of the deleted
// version are gone once Grace has passed, so a reader holding a tier from
// before then gets ErrGiftsGone (never ErrDamaged: the promotion is gone,
// not damaged).
func TestDeleteGiftsExpire(t *testing.T) {
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		grace := time.Hour
		if b.Real() {
			grace = 300 * time.Millisecond // real TTLs run on wall time
		}
		c := newCache(t, b, Options{Grace: grace})
		p := versioned("v1", 2, 4)
		if _, err := c.Refresh(ctx, p); err != nil {
			t.Fatal(err)
		}
		r, err := c.Match(ctx, QuantityQuery(p.ID, 4), MatchOptions{})
		if err != nil || !r.Tier.HasGifts {
			t.Fatalf("match: %+v %v", r, err)
		}
		if _, err := c.Delete(ctx, p.ID, 0); err != nil {
			t.Fatal(err)
		}
		rs := []Result{r}
		if err := c.Gifts(ctx, rs); err != nil || rs[0].Err != nil || len(rs[0].Tier.Gifts) != 1 {
			t.Fatalf("gifts within Grace after Delete: %+v %v", rs[0], err)
		}
		if b.Mini != nil {
			b.Mini.FastForward(grace + time.Millisecond)
		} else {
			deadline := time.Now().Add(10 * time.Second)
			for n, _ := b.Client.Exists(ctx, c.giftsKey(p.ID, r.Version)).Result(); n != 0; n, _ = b.Client.Exists(ctx, c.giftsKey(p.ID, r.Version)).Result() {
				if time.Now().After(deadline) {
					t.Fatal("gift list still there 10 s after Delete")
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		r.Tier.Gifts = nil
		rs = []Result{r}
		if err := c.Gifts(ctx, rs); err != nil || !errors.Is(rs[0].Err, ErrGiftsGone) || rs[0].Tier == nil {
			t.Fatalf("gifts after Grace: %+v %v", rs[0], err)
		}
	})
}
