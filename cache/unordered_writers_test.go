package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// unorderedPromo is promotion id with content told apart by n.
func unorderedPromo(id string, n int, rev int64) gradient.Promotion {
	return gradient.Promotion{ID: id, Metric: gradient.Quantity, Revision: rev, Tiers: []gradient.Tier{
		{ID: "t", Threshold: decimal.NewFromInt(int64(n + 1)), Reward: gradient.Reward{Kind: gradient.AmountOff, Amount: decimal.NewFromInt(1)}},
	}}
}

// raceRefresh runs one Refresh per promotion, all released at once by a
// gate, and returns each call's result and error in order.
func raceRefresh(ctx context.Context, c *Cache, promos []gradient.Promotion) ([]RefreshResult, []error) {
	res, errs := make([]RefreshResult, len(promos)), make([]error, len(promos))
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i, p := range promos {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			r, err := c.Refresh(ctx, p)
			if err == nil && len(r.Promotions) == 1 {
				res[i] = r.Promotions[0]
			} else if err == nil {
				err = fmt.Errorf("%d results", len(r.Promotions))
			}
			errs[i] = err
		}()
	}
	close(gate)
	wg.Wait()
	return res, errs
}

// TestFaultUnorderedWriters: under gated concurrent writers, a revision-0
// write replaces an unordered one (last writer wins, whole), never a
// promotion held at a revision, and never passes an ordered delete's
// tombstone (Stale, nothing written).
func TestFaultUnorderedWriters(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b, Options{RefreshRetries: 50})
		const n = 4
		unordered := func(id string, base int) []gradient.Promotion {
			ps := make([]gradient.Promotion, n)
			for i := range ps {
				ps[i] = unorderedPromo(id, base+i, 0)
			}
			return ps
		}
		// Unordered writers replace each other: every one writes, the last one stays whole.
		res, errs := raceRefresh(ctx, c, unordered("u", 0))
		versions := map[string]bool{}
		for i := range res {
			if errs[i] != nil || res[i].Outcome == Stale {
				t.Fatalf("unordered writer %d: %+v %v, want written", i, res[i], errs[i])
			}
			versions[res[i].Version] = true
		}
		info, err := c.Info(ctx, "u")
		if err != nil || info.Damage != "" || info.Revision != 0 || !versions[info.Version] {
			t.Fatalf("after unordered writers: %+v %v, want one writer's version, whole", info, err)
		}
		// Unordered writers racing one ordered writer: the ordered one stays.
		ps := append(unordered("r", 0), unorderedPromo("r", 100, 3))
		res, errs = raceRefresh(ctx, c, ps)
		for i := range errs {
			if errs[i] != nil {
				t.Fatalf("writer %d: %v", i, errs[i])
			}
		}
		if res[n].Outcome == Stale {
			t.Fatalf("ordered writer: Stale %+v", res[n])
		}
		info, err = c.Info(ctx, "r")
		if err != nil || info.Revision != 3 || info.Version != res[n].Version || info.Damage != "" {
			t.Fatalf("after the race: %+v %v, want revision 3 version %s", info, err, res[n].Version)
		}
		// Over a stored revision, every unordered writer is Stale.
		res, errs = raceRefresh(ctx, c, unordered("r", 10))
		for i := range res {
			if errs[i] != nil || res[i].Outcome != Stale || res[i].Revision != 3 {
				t.Fatalf("unordered over revision 3, writer %d: %+v %v, want Stale at 3", i, res[i], errs[i])
			}
		}
		if again, err := c.Info(ctx, "r"); err != nil || again.Version != info.Version {
			t.Fatalf("stored after Stale writers: %+v %v, want %s", again, err, info.Version)
		}
		// Past an ordered delete's tombstone, every unordered (and older) writer is Stale.
		if _, err := c.Delete(ctx, "r", 5); err != nil {
			t.Fatal(err)
		}
		res, errs = raceRefresh(ctx, c, append(unordered("r", 20), unorderedPromo("r", 30, 5)))
		for i := range res {
			if errs[i] != nil || res[i].Outcome != Stale || res[i].Revision != 5 {
				t.Fatalf("past the tombstone, writer %d: %+v %v, want Stale at 5", i, res[i], errs[i])
			}
		}
		if _, err := c.Info(ctx, "r"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleted promotion after Stale writers: %v, want ErrNotFound", err)
		}
		if r, err := c.Refresh(ctx, unorderedPromo("r", 40, 6)); err != nil || r.Promotions[0].Outcome != Added {
			t.Fatalf("revision 6 after the delete at 5: %+v %v, want Added", r, err)
		}
	})
}
