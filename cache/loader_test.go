package cache

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/soak"
	"github.com/tierset/tierset/internal/testredis"
)

const (
	envLoadChild  = "TIERSET_LOAD_CHILD"  // backend name
	envLoadPrefix = "TIERSET_LOAD_PREFIX" // the parent's prefix
)

// TestReadThroughRememberedMiss: an ID the source does not know is
// remembered in process and in Redis: 10,000 reads (2,000 without the
// soak switch) make 1 Load, another
// process (a second Cache) asks the source 0 times, and a warm of the ID
// clears the mark at once.
func TestReadThroughRememberedMiss(t *testing.T) {
	t.Parallel()
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
		// Up to 20,000 round trips: more than testCtx's 2 minutes on a loaded
		// machine under -race.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		ld := &countingLoader{promos: map[string]gradient.Promotion{}}
		// The reads take longer than the default MissTTL on a loaded
		// machine under -race; the mark must outlive them to be counted.
		lo := LoadOptions{MissTTL: time.Hour}
		c := newCache(t, b, Options{Loader: ld, Load: lo})
		other := newCache(t, b, Options{Loader: ld, Load: lo})
		q := QuantityQuery("ghost", 3)
		perReader := soak.Pick(1000, 200)
		var wg sync.WaitGroup
		var wrong atomic.Int64
		for g := 0; g < 10; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; k < perReader; k++ {
					r, _ := c.Match(ctx, q, MatchOptions{})
					if !errors.Is(r.Err, ErrNotFound) || !errors.Is(r.Err, ErrUnknownPromotion) || r.Tier != nil {
						wrong.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		if wrong.Load() != 0 || ld.calls.Load() != 1 {
			t.Fatalf("%d reads: %d wrong, %d loads (want 0, 1)", 10*perReader, wrong.Load(), ld.calls.Load())
		}
		if r, _ := other.Match(ctx, q, MatchOptions{}); !errors.Is(r.Err, ErrUnknownPromotion) || ld.calls.Load() != 1 {
			t.Fatalf("other process: %v, %d loads", r.Err, ld.calls.Load())
		}
		ttl, err := b.Client.PTTL(ctx, c.absentKey("ghost")).Result()
		if err != nil || ttl <= 0 || ttl > lo.MissTTL {
			t.Fatalf("mark in Redis: ttl %v %v", ttl, err)
		}
		p := simplePromotion("ghost", 1, 5)
		if _, err := other.Refresh(ctx, p); err != nil {
			t.Fatal(err)
		}
		if n, _ := b.Client.Exists(ctx, c.absentKey("ghost")).Result(); n != 0 {
			t.Fatal("a warm left the mark in Redis")
		}
		if known(other.rt, "ghost") {
			t.Fatal("a warm left the mark in its own process")
		}
		for _, cc := range []*Cache{c, other} {
			if r, err := cc.Match(ctx, q, MatchOptions{}); err != nil || r.Tier == nil || r.Tier.ID != "tier0" {
				t.Fatalf("after the warm: %+v %v", r, err)
			}
		}
		// Deleted again, now known to the source: the warming process asks
		// it again at once.
		ld.mu.Lock()
		ld.promos["ghost"] = p
		ld.mu.Unlock()
		if _, err := other.Delete(ctx, "ghost", 0); err != nil {
			t.Fatal(err)
		}
		if r, err := other.Match(ctx, q, MatchOptions{}); err != nil || r.Tier == nil || ld.calls.Load() != 2 {
			t.Fatalf("after delete: %+v %v, %d loads", r, err, ld.calls.Load())
		}
	})
}

// TestReadThroughMissClearedByTracking: with a near cache, a warm of a
// remembered-missing ID in another process clears this process's mark
// as soon as the invalidation arrives.
func TestReadThroughMissClearedByTracking(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		ld := &countingLoader{promos: map[string]gradient.Promotion{}}
		nc := newNearCache(t, nearClient(t, b), b.Prefix, Options{Loader: ld})
		writer := newCache(t, b, Options{})
		if r, _ := nc.Match(ctx, QuantityQuery("ghost", 3), MatchOptions{}); !errors.Is(r.Err, ErrUnknownPromotion) || !known(nc.rt, "ghost") {
			t.Fatalf("not remembered: %v", r.Err)
		}
		if _, err := writer.Refresh(ctx, simplePromotion("ghost", 1, 5)); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for known(nc.rt, "ghost") {
			if time.Now().After(deadline) {
				t.Fatal("mark still held 5 s after another process warmed the ID")
			}
			time.Sleep(time.Millisecond)
		}
	})
}

// TestReadThroughFailures: a failing source never gives a wrong answer:
// the cold line gets a typed error, the warm line of the same cart its
// answer, and a slow source never keeps a cart past its ctx deadline.
func TestReadThroughFailures(t *testing.T) {
	errSource := errors.New("source down")
	bad := simplePromotion("cold", 2, 2) // duplicate thresholds: Refresh refuses it
	wrongID := simplePromotion("other", 1)
	for _, tc := range []struct {
		name     string
		load     LoaderFunc
		timeout  time.Duration // Load.Timeout
		deadline time.Duration // the cart's ctx
		want     []error
	}{
		{"error", func(context.Context, string) (*gradient.Promotion, error) { return nil, errSource }, 0, 0, []error{ErrLoad, errSource}},
		{"panic", func(context.Context, string) (*gradient.Promotion, error) { panic("boom") }, 0, 0, []error{ErrLoad}},
		{"nil promotion", func(context.Context, string) (*gradient.Promotion, error) { return nil, nil }, 0, 0, []error{ErrLoad}},
		{"wrong id", func(context.Context, string) (*gradient.Promotion, error) { return &wrongID, nil }, 0, 0, []error{ErrLoad}},
		{"invalid promotion", func(context.Context, string) (*gradient.Promotion, error) { return &bad, nil }, 0, 0, []error{ErrLoad, gradient.ErrInvalid}},
		// Bounds far below the source's 5 s, and far above a round trip
		// on a loaded machine under -race (where one run stalled a
		// 500 ms load timeout's cart to 1.5 s).
		{"timeout ignoring ctx", func(context.Context, string) (*gradient.Promotion, error) {
			time.Sleep(5 * time.Second)
			return nil, errSource
		}, time.Second, 0, []error{ErrLoad, context.DeadlineExceeded}},
		// The cart's 2 s also covers its first read, which a loaded
		// machine under -race once stalled past 1 s; the bound below
		// (2 × 2 s + 0.2 s) stays under the source's 5 s.
		{"slow source, 2s cart", func(ctx context.Context, _ string) (*gradient.Promotion, error) {
			time.Sleep(5 * time.Second)
			return nil, errSource
		}, 0, 2 * time.Second, []error{ErrLoad, context.DeadlineExceeded}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The rows, and each row's backends, run side by side: the
			// slow ones spend their seconds asleep in the loader.
			t.Parallel()
			testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
				t.Parallel()
				c := newCache(t, b, Options{Loader: tc.load, Load: LoadOptions{Timeout: tc.timeout, LeaseTTL: 4 * tc.timeout}})
				warm := simplePromotion("warm", 1, 3)
				if _, err := c.Refresh(testCtx(t), warm); err != nil {
					t.Fatal(err)
				}
				ctx := testCtx(t)
				if tc.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.deadline)
					defer cancel()
				}
				start := time.Now()
				rs, err := c.MatchCart(ctx, []Query{QuantityQuery("cold", 3), QuantityQuery("warm", 3)}, MatchOptions{Gifts: true})
				took := time.Since(start)
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range tc.want {
					if !errors.Is(rs[0].Err, w) {
						t.Fatalf("cold line: %v, want %v", rs[0].Err, w)
					}
				}
				if rs[0].Tier != nil {
					t.Fatalf("cold line answered %+v", rs[0].Tier)
				}
				if rs[1].Err != nil || rs[1].Tier == nil || rs[1].Tier.ID != "tier1" {
					t.Fatalf("warm line: %+v", rs[1])
				}
				if limit := max(tc.deadline, tc.timeout); limit > 0 && took > 2*limit+200*time.Millisecond {
					t.Fatalf("cart took %v (limit %v)", took, limit)
				}
				t.Logf("cold line: %v (cart took %v)", rs[0].Err, took.Round(time.Millisecond))
			})
		})
	}
}

// TestReadThroughOptions: bad load options are invalid options.
func TestReadThroughOptions(t *testing.T) {
	t.Parallel()
	b := testredis.Mini(t)
	ld := &countingLoader{}
	for _, o := range []LoadOptions{{Timeout: -1}, {LeaseTTL: time.Second, Timeout: 2 * time.Second}, {MissTTL: time.Microsecond}, {MaxMisses: -1}} {
		if _, err := New(b.Client, Options{Loader: ld, Load: o}); !errors.Is(err, &ValidationError{Field: "options"}) {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// TestReadThroughMissesBounded: the in-process marks and failures never
// exceed MaxMisses however many IDs arrive, and the newest is always kept.
func TestReadThroughMissesBounded(t *testing.T) {
	t.Parallel()
	for _, limit := range []int{1, 8, 100} {
		rt := &readThrough{opt: LoadOptions{MaxMisses: limit, FailTTL: time.Minute}, trust: time.Minute, misses: map[string]mark{},
			failures: map[string]failure{}}
		for i := 0; i < 10*limit+3; i++ {
			id := "u" + strconv.Itoa(i)
			rt.remember(id, time.Minute, false)
			if n := len(rt.misses); n > limit {
				t.Fatalf("MaxMisses %d: %d marks after %d inserts", limit, n, i+1)
			}
			if !known(rt, id) {
				t.Fatalf("MaxMisses %d: the newest mark %s was dropped", limit, id)
			}
			rt.mu.Lock()
			rt.fail(id, ErrLoad)
			n := len(rt.failures)
			rt.mu.Unlock()
			if n > limit || rt.failed(id) == nil {
				t.Fatalf("MaxMisses %d: %d failures after %d, or the newest dropped", limit, n, i+1)
			}
		}
	}
}

// TestReadThroughFailureRemembered: while the source is down, one cart
// pays the failed load and the next carts get its ErrLoad at once without
// asking the source; a warm of the ID forgets the failure at once, and
// after FailTTL the source is asked again.
func TestReadThroughFailureRemembered(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		errSource := errors.New("source down")
		for _, tc := range []struct {
			name    string
			failTTL time.Duration
			reads   int                                                // while down
			clear   func(t *testing.T, c *Cache, p gradient.Promotion) // ends the remembered failure
			want    int64                                              // Loads, after one more read
		}{
			{"warm forgets", time.Minute, 100, func(t *testing.T, c *Cache, p gradient.Promotion) {
				t.Helper()
				if _, err := c.Refresh(ctx, p); err != nil {
					t.Fatal(err)
				}
			}, 1},
			{"expires", 50 * time.Millisecond, 1, func(t *testing.T, c *Cache, p gradient.Promotion) {
				t.Helper()
				deadline := time.Now().Add(5 * time.Second)
				for c.rt.failed(p.ID) != nil {
					if time.Now().After(deadline) {
						t.Fatal("the failure still remembered 5 s after a 50 ms FailTTL")
					}
					time.Sleep(time.Millisecond)
				}
			}, 2},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := simplePromotion("cold-"+strings.ReplaceAll(tc.name, " ", "-"), 1, 3)
				var calls atomic.Int64
				var up atomic.Bool
				ld := LoaderFunc(func(context.Context, string) (*gradient.Promotion, error) {
					calls.Add(1)
					if !up.Load() {
						return nil, errSource
					}
					return &p, nil
				})
				c := newCache(t, b, Options{Loader: ld, Load: LoadOptions{FailTTL: tc.failTTL}})
				for i := 0; i < tc.reads; i++ {
					r, err := c.Match(ctx, QuantityQuery(p.ID, 3), MatchOptions{})
					if err == nil || !errors.Is(r.Err, ErrLoad) || !errors.Is(r.Err, errSource) || r.Tier != nil {
						t.Fatalf("read %d while down: %+v %v, want ErrLoad wrapping the source's error", i, r, err)
					}
				}
				if n := calls.Load(); n != 1 {
					t.Fatalf("%d reads while down made %d Loads, want 1", tc.reads, n)
				}
				up.Store(true)
				tc.clear(t, c, p)
				r, err := c.Match(ctx, QuantityQuery(p.ID, 3), MatchOptions{})
				if err != nil || r.Tier == nil || r.Tier.ID != "tier1" {
					t.Fatalf("after the failure ended: %+v %v", r, err)
				}
				if n := calls.Load(); n != tc.want {
					t.Fatalf("%d Loads, want %d", n, tc.want)
				}
			})
		}
	})
}

// known reports whether rt remembers id as unknown or ended.
func known(rt *readThrough, id string) bool {
	k, _ := rt.remembered(id)
	return k
}

// TestReadThroughEnded: a promotion the source still has but whose End +
// Grace has passed is loaded once for a 100-line cart, not per line, is
// not written (its keys would expire at once), answers ErrNotActive on
// every line, and is remembered like an unknown ID: a second cart and a
// second process make no load until MissTTL.
func TestReadThroughEnded(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		p := simplePromotion("ended", 2, 4)
		p.Start = time.Now().Add(-72 * time.Hour)
		p.End = time.Now().Add(-48 * time.Hour) // Grace (24h) is over too
		src := &countingLoader{promos: map[string]gradient.Promotion{"ended": p}}
		obs := &countingObserver{}
		c := newCache(t, b, Options{Loader: src, Observer: obs})
		cart := make([]Query, 100)
		for i := range cart {
			cart[i] = QuantityQuery("ended", int64(i))
		}
		for round := 0; round < 2; round++ {
			rs, err := c.MatchCart(ctx, cart, MatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range rs {
				if !errors.Is(r.Err, ErrNotActive) || errors.Is(r.Err, ErrNotFound) {
					t.Fatalf("round %d line %d: %+v, want ErrNotActive", round, i, r)
				}
			}
		}
		other := newCache(t, b, Options{Loader: src})
		if r, _ := other.Match(ctx, QuantityQuery("ended", 3), MatchOptions{}); !errors.Is(r.Err, ErrNotActive) {
			t.Fatalf("another process: %+v", r)
		}
		if n := src.calls.Load(); n != 1 {
			t.Fatalf("%d loads for 201 lines in two processes, want 1", n)
		}
		if n := obs.loads[LoadEnded].Load(); n != 1 {
			t.Fatalf("LoadEnded %d, want 1", n)
		}
		if n := obs.notActive.Load(); n != 200 {
			t.Fatalf("OnLookup not active %d, want 200", n)
		}
		if n, _ := b.Client.Exists(ctx, c.tiersKey("ended"), c.metaKey("ended")).Result(); n != 0 {
			t.Fatalf("an ended promotion was written (%d keys)", n)
		}
		// A warm of a live copy forgets the mark at once.
		live := simplePromotion("ended", 2, 4)
		if _, err := c.Refresh(ctx, live); err != nil {
			t.Fatal(err)
		}
		if r, err := c.Match(ctx, QuantityQuery("ended", 3), MatchOptions{}); err != nil || r.Tier == nil {
			t.Fatalf("after a warm: %+v %v", r, err)
		}
	})
}
