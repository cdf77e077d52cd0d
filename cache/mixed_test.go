package cache

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// splitHook sends a cart pipeline in two halves and runs between() in the
// gap, so a refresh commits between a line's hit and next ZRANGE: the
// interleaving the version check exists to catch.
type splitHook struct {
	armed   atomic.Bool
	between func()
}

func (h *splitHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *splitHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *splitHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) != 2 || cmds[0].Name() != "zrange" || !h.armed.CompareAndSwap(true, false) {
			return next(ctx, cmds)
		}
		if err := next(ctx, cmds[:1]); err != nil {
			return err
		}
		h.between()
		return next(ctx, cmds[1:])
	}
}

// TestMixedVersionsAreRetried: when a refresh lands between the two reads
// of a Next match, the versions differ, and the line is re-read in
// one recheck (lua/recheck.lua): the answer is wholly the new version, at one
// extra round trip.
func TestMixedVersionsAreRetried(t *testing.T) {
	t.Parallel()
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
		if b.IsCluster() {
			t.Skip("the split hook needs a single-node client")
		}
		ctx := testCtx(t)
		writer := newCache(t, b, Options{})
		v1, v2 := versioned("v1", 2, 4, 6, 8), versioned("v2", 3, 5, 7, 9)
		if _, err := writer.Refresh(ctx, v1); err != nil {
			t.Fatal(err)
		}
		var refreshErr error
		hook := &splitHook{between: func() { _, refreshErr = writer.Refresh(ctx, v2) }}
		base := b.Client.(*redis.Client).Options()
		rc := redis.NewClient(&redis.Options{Addr: base.Addr, DB: base.DB, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rc.Close() })
		rc.AddHook(hook)
		obs := &countingObserver{}
		reader, _ := New(rc, Options{Prefix: b.Prefix, Observer: obs})
		hook.armed.Store(true)
		r, err := reader.Match(ctx, QuantityQuery("flip", 4), MatchOptions{Next: true})
		if refreshErr != nil || hook.armed.Load() {
			t.Fatalf("the refresh did not run between the reads: %v", refreshErr)
		}
		m2, _ := gradient.NewMatcher(v2)
		want, _ := m2.MatchScore(4)
		if err != nil || r.Tier.ID != want.Tier.ID || r.Next.ID != want.Next.ID {
			t.Fatalf("got %+v / next %+v (%v), want wholly v2: %s / %s", r.Tier, r.Next, err, want.Tier.ID, want.Next.ID)
		}
		if n := obs.roundTrips.Load(); n != 2 {
			t.Fatalf("%d round trips, want 2 (pipeline + one recheck)", n)
		}
	})
}
