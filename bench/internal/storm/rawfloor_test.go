package storm

import (
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/bench/internal/tiers"
	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/internal/testredis"
)

// TestRawFloorReads: the floor reads each distinct promotion of a cart
// once, at the largest count its lines ask, from the keys the cache
// wrote, and check refuses keys the cache did not write.
func TestRawFloorReads(t *testing.T) {
	t.Parallel()
	b := testredis.Mini(t)
	ctx := testredis.Ctx(t)
	c, err := cache.New(b.Client, cache.Options{Prefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Refresh(ctx, promotion(0, 0, 1), promotion(1, 0, 1)); err != nil {
		t.Fatal(err)
	}
	client, ok := b.Client.(*redis.Client)
	if !ok {
		t.Skipf("the floor takes a *redis.Client; this backend gives %T", b.Client)
	}
	f := &rawFloor{client: client, prefix: b.Prefix}
	if err := f.check(ctx, promoID(0)); err != nil {
		t.Fatalf("check on the cache's key: %v", err)
	}
	if err := (&rawFloor{client: client, prefix: b.Prefix + ":other"}).check(ctx, promoID(0)); err == nil {
		t.Fatal("check passed on a key the cache did not write")
	}

	cart := []cache.Query{
		cache.QuantityQuery(promoID(1), 3),
		cache.QuantityQuery(promoID(0), 5),
		cache.QuantityQuery(promoID(1), 9),
		cache.QuantityQuery(promoID(1), 2),
	}
	f.prepare([][][]cache.Query{{cart}})
	got := f.asks[&cart[0]]
	want := []rawRead{{key: tiers.Key(b.Prefix, promoID(1)), max: "9"}, {key: tiers.Key(b.Prefix, promoID(0)), max: "5"}}
	if !slices.Equal(got, want) {
		t.Fatalf("reads %v, want %v", got, want)
	}
	if _, err := f.price(ctx, nil, cart, cache.MatchOptions{}); err != nil {
		t.Fatalf("price: %v", err)
	}
	if _, err := f.price(ctx, nil, slices.Clone(cart), cache.MatchOptions{}); err == nil {
		t.Fatal("price of a cart not prepared passed")
	}
}
