package cache

import (
	"context"
	"errors"
	"testing"

	"github.com/tierset/tierset/internal/testredis"
)

// TestFaultEvictionGiftsDamaged: a hit whose gift list is gone is told
// apart by what else is left: the hit's version still stored (its meta
// or its tiers key) is damage; nothing of the promotion left is damage
// for a hit this call read (eviction took every key, as under
// allkeys-lru), and ErrGiftsGone only for a hit the caller kept (it may be
// older than Grace); another version stored, or a tombstone, is the
// refresh or delete race, ErrGiftsGone. Each is a Match with Gifts (a
// fresh hit) whose keys are removed between its hit and its gift fetch,
// and a Cache.Gifts of a kept hit.
func TestFaultEvictionGiftsDamaged(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// after the hit was read: what happens to the promotion before
		// its gifts are fetched
		evict func(c *Cache, id, version string) []string // keys to DEL
		write func(c *Cache, id string) error
		fresh error
		kept  error
	}{
		{"gift list evicted", func(c *Cache, id, v string) []string { return []string{c.giftsKey(id, v)} }, nil, ErrDamaged, ErrDamaged},
		{"gifts and meta evicted", func(c *Cache, id, v string) []string { return []string{c.giftsKey(id, v), c.metaKey(id)} }, nil, ErrDamaged, ErrDamaged},
		{"every key evicted", func(c *Cache, id, v string) []string {
			return []string{c.giftsKey(id, v), c.metaKey(id), c.tiersKey(id)}
		}, nil, ErrDamaged, ErrGiftsGone},
		{"replaced, its grace over", func(c *Cache, id, v string) []string { return []string{c.giftsKey(id, v)} },
			func(c *Cache, id string) error { _, err := c.Refresh(testCtx(t), revPromotion(id, 2, 2)); return err }, ErrGiftsGone, ErrGiftsGone},
		{"deleted, its grace over", func(c *Cache, id, v string) []string { return []string{c.giftsKey(id, v)} },
			func(c *Cache, id string) error { _, err := c.Delete(testCtx(t), id, 2); return err }, ErrGiftsGone, ErrGiftsGone},
	}
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b, Options{})
		for k, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				for _, fresh := range []bool{true, false} {
					id := "gd" + string(rune('a'+k))
					if !fresh {
						id += "-kept"
					}
					if _, err := c.Refresh(ctx, revPromotion(id, 1, 1)); err != nil {
						t.Fatal(err)
					}
					r, err := c.Match(ctx, QuantityQuery(id, 4), MatchOptions{})
					if err != nil || r.Tier == nil || !r.Tier.HasGifts {
						t.Fatalf("hit: %+v %v", r, err)
					}
					if tt.write != nil {
						if err := tt.write(c, id); err != nil {
							t.Fatal(err)
						}
					}
					if err := b.Client.Del(ctx, tt.evict(c, id, r.Version)...).Err(); err != nil {
						t.Fatal(err)
					}
					rs := []Result{r}
					want := tt.kept
					if fresh {
						want = tt.fresh
						_, err = c.fetchGifts(ctx, rs, true, false) // the gift fetch of the Match that read the hit
					} else {
						err = c.Gifts(ctx, rs)
					}
					if err != nil || !errors.Is(rs[0].Err, want) || rs[0].Tier == nil {
						t.Fatalf("fresh %v: %+v %v, want %v", fresh, rs[0], err, want)
					}
				}
			})
		}
	})
}
