package cache

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// nilObserver is an Observer whose methods read their receiver, as most
// do: a typed nil of it panics at the first event.
type nilObserver struct {
	NopObserver
	n int
}

func (o *nilObserver) OnNear(string, NearEvent) { o.n++ }

// nilLoader is a Loader that reads its receiver.
type nilLoader struct{ p *gradient.Promotion }

func (l *nilLoader) Load(context.Context, string) (*gradient.Promotion, error) { return l.p, nil }

// TestNearTypedNilInputs: a typed nil where the near cache's API takes an
// interface (the client, the Observer, the Loader) or a nil *Cache is
// refused with ErrInvalid naming the input, never a panic, and nothing
// is dialled.
func TestNearTypedNilInputs(t *testing.T) {
	t.Parallel()
	near := &NearCacheOptions{}
	for _, tc := range []struct {
		name  string
		run   func() error
		field string
	}{
		{"nil *redis.Client", func() error { _, err := New((*redis.Client)(nil), Options{NearCache: near}); return err }, "client"},
		{"nil *redis.ClusterClient", func() error { _, err := New((*redis.ClusterClient)(nil), Options{NearCache: near}); return err }, "client"},
		{"nil *redis.Ring", func() error { _, err := New((*redis.Ring)(nil), Options{}); return err }, "client"},
		{"nil *redis.Client without near cache", func() error { _, err := New((*redis.Client)(nil), Options{}); return err }, "client"},
		{"nil *Observer", func() error {
			_, err := New(unreachable(t), Options{NearCache: near, Observer: (*nilObserver)(nil)})
			return err
		}, "options"},
		{"nil LoaderFunc", func() error {
			_, err := New(unreachable(t), Options{NearCache: near, Loader: LoaderFunc(nil)})
			return err
		}, "options"},
		{"nil *Loader", func() error {
			_, err := New(unreachable(t), Options{NearCache: near, Loader: (*nilLoader)(nil)})
			return err
		}, "options"},
		{"Close of a nil *Cache", func() error { return (*Cache)(nil).Close() }, "cache"},
		{"NearStats of a nil *Cache", func() error {
			if st := (*Cache)(nil).NearStats(); st != (NearStats{}) {
				return errors.New("non-zero stats")
			}
			return invalid("cache", "zero stats, as wanted")
		}, "cache"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if v := recover(); v != nil {
						t.Fatalf("panic: %v", v)
					}
				}()
				err = tc.run()
			}()
			if !errors.Is(err, ErrInvalid) || !errors.Is(err, &ValidationError{Field: tc.field}) {
				t.Fatalf("err %v, want ErrInvalid for field %q", err, tc.field)
			}
		})
	}
}

// unreachable is a client on a port nobody listens on: New must refuse
// before it is used.
func unreachable(t *testing.T) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestNearExtremeOptions: the bounds of NearCacheOptions and LoadOptions
// at their extremes. Below the least allowed value they are refused with
// ErrInvalid (Field "options"); at the largest values Go can hold they
// are accepted, saturate as their docs say, and the near cache still
// answers, holds and remembers as it does at the defaults.
func TestNearExtremeOptions(t *testing.T) {
	t.Parallel()
	cl := unreachable(t)
	for _, o := range []NearCacheOptions{
		{MaxPromotions: math.MinInt}, {MaxBytes: math.MinInt64}, {MaxStaleness: -1},
		{MaxStaleness: math.MinInt64}, {MaxStaleness: 10*time.Millisecond - 1}, {MaxTiers: math.MinInt},
	} {
		if _, err := New(cl, Options{NearCache: &o}); !errors.Is(err, &ValidationError{Field: "options"}) {
			t.Errorf("%+v: err %v, want ErrInvalid (options)", o, err)
		}
	}
	for _, lo := range []LoadOptions{{Timeout: math.MaxInt64}, {FailTTL: math.MinInt64}, {MissTTL: -1}} {
		if _, err := New(cl, Options{NearCache: &NearCacheOptions{}, Loader: failLoader(nil), Load: lo}); !errors.Is(err, &ValidationError{Field: "options"}) {
			t.Errorf("%+v: err %v, want ErrInvalid (options)", lo, err)
		}
	}

	b := testredis.Redis(t)
	ctx := testCtx(t)
	w := newCache(t, b, Options{})
	if _, err := w.Refresh(ctx, stalePromotion(1)); err != nil {
		t.Fatal(err)
	}
	want := mustVersion(t, stalePromotion(1))
	huge := NearCacheOptions{MaxPromotions: math.MaxInt, MaxBytes: math.MaxInt64, MaxStaleness: math.MaxInt64, MaxTiers: math.MaxInt}
	var loads atomic.Int64
	nc := newNearCache(t, nearClient(t, b), b.Prefix, Options{
		NearCache:    &huge,
		TombstoneTTL: math.MaxInt64,
		Loader:       failLoader(&loads),
		Load:         LoadOptions{Timeout: math.MaxInt64 - 2, LeaseTTL: math.MaxInt64 - 1, MissTTL: math.MaxInt64, FailTTL: math.MaxInt64},
	})
	if got := nc.near.opt.MaxTiers; got != gradient.MaxTiers {
		t.Errorf("MaxTiers %d saturated to %d, want gradient.MaxTiers (%d)", huge.MaxTiers, got, gradient.MaxTiers)
	}
	for k := 0; k < 2; k++ {
		r, err := nc.Match(ctx, QuantityQuery("s", 4), MatchOptions{})
		if err != nil || r.Err != nil || r.Version != want {
			t.Fatalf("read %d with the largest bounds: version %q, err %v %v, want %q", k, r.Version, err, r.Err, want)
		}
	}
	if st := nc.NearStats(); st.Hits != 1 || st.Promotions != 1 {
		t.Fatalf("with the largest bounds: %+v, want the ladder held and the second read a hit", st)
	}
	// A failed load is remembered for FailTTL, here as long as a
	// time.Duration can say: the second read does not call the loader.
	for k := 0; k < 2; k++ {
		if r, _ := nc.Match(ctx, QuantityQuery("gone", 4), MatchOptions{}); !errors.Is(r.Err, ErrLoad) {
			t.Fatalf("read %d of a promotion whose load fails: %v, want ErrLoad", k, r.Err)
		}
	}
	if n := loads.Load(); n != 1 {
		t.Fatalf("%d loads for two reads under an unbounded FailTTL, want 1", n)
	}
}

// failLoader counts its calls in n (when not nil) and fails each.
func failLoader(n *atomic.Int64) Loader {
	return LoaderFunc(func(context.Context, string) (*gradient.Promotion, error) {
		if n != nil {
			n.Add(1)
		}
		return nil, errors.New("source down")
	})
}
