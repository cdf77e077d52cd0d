package cache

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// waitCount polls v, up to 10 s, until it reaches want; async events
// (tracking invalidations, a killed connection) are seen this way.
func waitCount(t *testing.T, what string, v interface{ Load() int64 }, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for v.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d after 10 s, want %d", what, v.Load(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestObserverNearEvents: real traffic through a near cache reaches
// OnNear: a miss installs, a repeat hits, a Refresh by another client
// invalidates and the background re-read installs the new version, a second promotion past MaxPromotions evicts the first, and
// a killed tracking connection drops everything.
func TestObserverNearEvents(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		writer := newCache(t, b, Options{})
		if _, err := writer.Refresh(ctx, simplePromotion("x", 1, 2), simplePromotion("y", 1)); err != nil {
			t.Fatal(err)
		}
		obs := &countingObserver{}
		nc := newNearCache(t, nearClient(t, b), b.Prefix, Options{Observer: obs, NearCache: &NearCacheOptions{MaxPromotions: 1}})
		for i := range obs.near {
			obs.near[i].Store(0) // the tracking probes' misses
		}
		match := func(id string) {
			t.Helper()
			if _, err := nc.Match(ctx, QuantityQuery(id, 2), MatchOptions{}); err != nil {
				t.Fatalf("match %s: %v", id, err)
			}
		}
		type counts map[NearEvent]int64
		check := func(step string, want counts) {
			t.Helper()
			for ev := NearHit; ev <= NearDropAll; ev++ {
				if got := obs.near[ev].Load(); got != want[ev] {
					t.Errorf("%s: %s = %d, want %d", step, ev, got, want[ev])
				}
			}
		}
		match("x")
		check("first read", counts{NearMiss: 1, NearInstall: 1})
		match("x")
		check("second read", counts{NearHit: 1, NearMiss: 1, NearInstall: 1})
		if _, err := writer.Refresh(ctx, simplePromotion("x", 1, 3)); err != nil {
			t.Fatal(err)
		}
		waitCount(t, "invalidate", &obs.near[NearInvalidate], 1)
		// x was in recent use: it is re-read in the background, so the
		// next read of it is a hit on the new version.
		waitCount(t, "install", &obs.near[NearInstall], 2)
		check("refresh elsewhere", counts{NearHit: 1, NearMiss: 1, NearInstall: 2, NearInvalidate: 1})
		match("x")
		match("y")
		check("x again, then y", counts{NearHit: 2, NearMiss: 2, NearInstall: 3, NearInvalidate: 1, NearEvict: 1})
		for _, id := range nc.trackingIDs() {
			killClient(t, b.Client, id)
		}
		waitCount(t, "drop_all", &obs.near[NearDropAll], 1)
		check("tracking killed", counts{NearHit: 2, NearMiss: 2, NearInstall: 3, NearInvalidate: 1, NearEvict: 1, NearDropAll: 1})
	})
}

// TestObserverNearDirectLineLookedUpOnce: a line the near cache sends to
// the Redis path (here a promotion over MaxTiers) is one OnLookup, not
// one from each path.
func TestObserverNearDirectLineLookedUpOnce(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		writer := newCache(t, b, Options{})
		if _, err := writer.Refresh(ctx, simplePromotion("wide", 1, 2, 3, 4)); err != nil {
			t.Fatal(err)
		}
		obs := &countingObserver{}
		nc := newNearCache(t, nearClient(t, b), b.Prefix, Options{Observer: obs, NearCache: &NearCacheOptions{MaxTiers: 1}})
		for round := range 2 { // a ladder read that finds it too big, then the mark that skips it
			obs.lookups.Store(0)
			if _, err := nc.Match(ctx, QuantityQuery("wide", 2), MatchOptions{}); err != nil {
				t.Fatal(err)
			}
			if n := obs.lookups.Load(); n != 1 {
				t.Fatalf("round %d: %d lookups for one line, want 1", round, n)
			}
		}
	})
}

// TestObserverGiftRoundTrips: a Match with Gifts reports its gift reads
// as OpGifts round trips, apart from its OpMatch ones, on the Redis path
// and on the near path (where the held version's gift lists cost none).
func TestObserverGiftRoundTrips(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		writer := newCache(t, b, Options{})
		if _, err := writer.Refresh(ctx, simplePromotion("g", 1, 2)); err != nil {
			t.Fatal(err)
		}
		obs := &countingObserver{}
		plain := newCache(t, b, Options{Observer: obs})
		var nc *Cache
		if b.Real() { // miniredis has no client tracking: the near cache would never engage
			nc = newNearCache(t, nearClient(t, b), b.Prefix, Options{Observer: obs})
		}
		for _, tc := range []struct {
			name       string
			near       bool
			match, gfs int64 // want: round trips by op
		}{
			{"redis path", false, 1, 1},
			{"near, first read", true, 1, 1},
			{"near, version held", true, 0, 0},
		} {
			c := plain
			if tc.near {
				if nc == nil {
					continue
				}
				c = nc
			}
			obs.byOp[OpMatch].Store(0)
			obs.byOp[OpGifts].Store(0)
			r, err := c.Match(ctx, QuantityQuery("g", 2), MatchOptions{Gifts: true})
			if err != nil || r.Tier == nil || len(r.Tier.Gifts) != 1 {
				t.Fatalf("%s: %+v %v, want tier1 with its gift", tc.name, r.Tier, err)
			}
			if m, g := obs.byOp[OpMatch].Load(), obs.byOp[OpGifts].Load(); m != tc.match || g != tc.gfs {
				t.Errorf("%s: match %d, gifts %d round trips; want %d, %d", tc.name, m, g, tc.match, tc.gfs)
			}
		}
	})
}

// TestObserverLoadOutcomes: each way a read-through ends reaches OnLoad
// once, with its outcome.
func TestObserverLoadOutcomes(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		obs := &countingObserver{}
		ld := LoaderFunc(func(_ context.Context, id string) (*gradient.Promotion, error) {
			switch id {
			case "known", "other":
				p := simplePromotion(id, 1, 2)
				return &p, nil
			case "broken":
				return nil, errors.New("source down")
			}
			return nil, ErrUnknownPromotion
		})
		c := newCache(t, b, Options{Observer: obs, Loader: ld})
		writer := newCache(t, b, Options{})
		match := func(id string) error {
			_, err := c.Match(ctx, QuantityQuery(id, 2), MatchOptions{})
			return err
		}
		for _, step := range []struct {
			name   string
			run    func() error
			want   LoadOutcome
			lookup *atomic.Int64 // the one OnLookup the line gets
		}{
			{"loaded", func() error { return match("known") }, LoadLoaded, &obs.hits},
			{"unknown", func() error { return match("nope") }, LoadUnknown, &obs.notFound},
			{"remembered", func() error { return match("nope") }, LoadRemembered, &obs.notFound},
			{"failed", func() error { return match("broken") }, LoadFailed, &obs.errs},
			{"shared", func() error {
				// Another process holds the lease and stores the promotion
				// while this read waits for it.
				if err := b.Client.Set(ctx, c.leaseKey("other"), "elsewhere", time.Minute).Err(); err != nil {
					return err
				}
				done := make(chan error, 1)
				go func() { done <- match("other") }()
				deadline := time.Now().Add(10 * time.Second)
				for !c.rt.flying("other") {
					if time.Now().After(deadline) {
						return errors.New("the read never started its load")
					}
					time.Sleep(time.Millisecond)
				}
				if _, err := writer.Refresh(ctx, simplePromotion("other", 1, 2)); err != nil {
					return err
				}
				return <-done
			}, LoadShared, &obs.hits},
		} {
			for i := range obs.loads {
				obs.loads[i].Store(0)
			}
			for _, n := range []*atomic.Int64{&obs.lookups, &obs.hits, &obs.notFound, &obs.errs} {
				n.Store(0)
			}
			err := step.run()
			switch {
			case step.want == LoadLoaded || step.want == LoadShared:
				if err != nil {
					t.Fatalf("%s: %v", step.name, err)
				}
			case step.want == LoadFailed:
				if !errors.Is(err, ErrLoad) {
					t.Fatalf("%s: %v, want ErrLoad", step.name, err)
				}
			case !errors.Is(err, ErrUnknownPromotion):
				t.Fatalf("%s: %v, want ErrUnknownPromotion", step.name, err)
			}
			var total int64
			for i := range obs.loads {
				total += obs.loads[i].Load()
			}
			if got := obs.loads[step.want].Load(); got != 1 || total != 1 {
				t.Fatalf("%s: %d %s of %d OnLoad calls (by outcome %v), want 1 of 1", step.name, got, step.want, total, obs.loadCounts())
			}
			if n, k := obs.lookups.Load(), step.lookup.Load(); n != 1 || k != 1 {
				t.Fatalf("%s: %d OnLookup calls, %d of the expected outcome; want 1 and 1", step.name, n, k)
			}
		}
	})
}

// TestObserverRefreshDone: one OnRefreshDone per Refresh call, with its
// promotion count and its error.
func TestObserverRefreshDone(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		obs := &countingObserver{}
		c := newCache(t, b, Options{Observer: obs})
		if _, err := c.Refresh(ctx, simplePromotion("r1", 1), simplePromotion("r2", 1)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Refresh(ctx, gradient.Promotion{ID: "invalid"}); !errors.Is(err, gradient.ErrInvalid) {
			t.Fatalf("refresh of an invalid promotion: %v, want gradient.ErrInvalid", err)
		}
		if calls, n, errs := obs.refreshCalls.Load(), obs.refreshN.Load(), obs.refreshErrs.Load(); calls != 2 || n != 3 || errs != 1 {
			t.Fatalf("OnRefreshDone: %d calls, %d promotions, %d errors; want 2, 3, 1", calls, n, errs)
		}
	})
}
