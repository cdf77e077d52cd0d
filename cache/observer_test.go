package cache

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/testredis"
)

// TestObserverRoundTrips: what Refresh and Delete report to the Observer
// equals what a counting hook sees.
func TestObserverRoundTrips(t *testing.T) {
	t.Parallel()
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
		if b.IsCluster() {
			t.Skip("per-node counting; covered by TestClusterCartPerMaster")
		}
		ctx := testCtx(t)
		obs := &countingObserver{}
		c := newCache(t, b, Options{Observer: obs})
		rt, err := testredis.CountRoundTrips(ctx, b.Client)
		if err != nil {
			t.Fatal(err)
		}
		for _, step := range []struct {
			name string
			run  func() error
		}{
			{"added", func() error { _, err := c.Refresh(ctx, simplePromotion("x", 1, 2)); return err }},
			{"unchanged", func() error { _, err := c.Refresh(ctx, simplePromotion("x", 1, 2)); return err }},
			{"updated", func() error { _, err := c.Refresh(ctx, simplePromotion("x", 1, 3)); return err }},
			{"delete", func() error { _, err := c.Delete(ctx, "x", 0); return err }},
			{"info", func() error { _, err := c.Info(ctx, "x"); return err }},
		} {
			// Warm a connection for commands and one for pipelines: a
			// fresh connection's handshake would be counted.
			if err := b.Client.Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Client.Pipelined(ctx, func(p redis.Pipeliner) error { p.Ping(ctx); return nil }); err != nil {
				t.Fatal(err)
			}
			rt.Reset()
			obs.roundTrips.Store(0)
			if err := step.run(); err != nil && step.name != "info" {
				t.Fatal(err)
			}
			if got, rep := rt.Total(), obs.roundTrips.Load(); int64(got) != rep {
				t.Fatalf("%s: counted %d round trips, observer got %d", step.name, got, rep)
			}
		}
	})
}
