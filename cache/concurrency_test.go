package cache

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

func versioned(tag string, thresholds ...int64) gradient.Promotion {
	p := simplePromotion("flip", thresholds...)
	for i := range p.Tiers {
		p.Tiers[i].ID = tag + "-" + p.Tiers[i].ID
		p.Tiers[i].Gifts = []gradient.Gift{{SKU: tag + "-gift", Qty: 1}}
	}
	return p
}

// TestConcurrentRefresh (invariant 3): 8 readers match (with Next and
// Gifts) while a writer refreshes 100 times between two versions with
// different tiers and different gifts. Every read must be wholly one
// version: tier, next tier and gifts all of the version that answered.
func TestConcurrentRefresh(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		c := newCache(t, b, Options{})
		v1, v2 := versioned("v1", 2, 4, 6, 8), versioned("v2", 3, 5, 7, 9, 11)
		oracle := map[string]*gradient.Matcher{}
		tags := map[string]string{}
		for _, p := range []gradient.Promotion{v2, v1} {
			rep, err := c.Refresh(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			m, _ := gradient.NewMatcher(p)
			oracle[rep.Promotions[0].Version] = m
			tags[rep.Promotions[0].Version] = p.Tiers[0].ID[:2]
		}
		var reads, mixed atomic.Int64
		stop := make(chan struct{})
		wg := untilStopped(8, stop, func(r, k int) bool {
			qs := []Query{QuantityQuery("flip", int64(k%13)), QuantityQuery("flip", int64((k+r)%13)), QuantityQuery("flip", 6)}
			rs, err := c.MatchCart(ctx, qs, MatchOptions{Next: true, Gifts: true})
			if err != nil {
				t.Errorf("reader %d: %v", r, err)
				return false
			}
			for i, res := range rs {
				reads.Add(1)
				if msg := checkWhole(oracle, tags, qs[i], res); msg != "" {
					mixed.Add(1)
					t.Errorf("reader %d: mixed read: %s", r, msg)
				}
			}
			return true
		})
		start := time.Now()
		for i := 0; i < 100; i++ {
			p := v1
			if i%2 == 0 {
				p = v2
			}
			rep, err := c.Refresh(ctx, p)
			if err != nil || rep.Updated != 1 {
				t.Errorf("refresh %d: %+v %v", i, rep, err)
				break
			}
		}
		elapsed := time.Since(start)
		close(stop)
		wg.Wait()
		t.Logf("100 refreshes in %v; 8 readers did %d line reads, %d mixed", elapsed.Round(time.Millisecond), reads.Load(), mixed.Load())
		if reads.Load() < 100 {
			t.Fatalf("only %d reads overlapped the refreshes", reads.Load())
		}
	})
}

// untilStopped runs fn(r, k) in n goroutines (r the goroutine, k its
// round) until stop is closed or fn returns false; wait on the result.
func untilStopped(n int, stop <-chan struct{}, fn func(r, k int) bool) *sync.WaitGroup {
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				if !fn(r, k) {
					return
				}
			}
		}()
	}
	return &wg
}

// checkWhole returns "" when res is wholly the version that answered.
func checkWhole(oracle map[string]*gradient.Matcher, tags map[string]string, q Query, res Result) string {
	m := oracle[res.Version]
	if m == nil {
		return "unknown version " + res.Version
	}
	tag := tags[res.Version]
	want, werr := m.MatchScore(q.Value.IntPart())
	switch {
	case werr != nil && !errors.Is(res.Err, ErrNoTier):
		return "want no tier, got " + errString(res.Err)
	case werr == nil && (res.Err != nil || res.Tier == nil || res.Tier.ID != want.Tier.ID):
		return "tier mismatch: " + errString(res.Err)
	case want.Next == nil && res.Next != nil, want.Next != nil && (res.Next == nil || res.Next.ID != want.Next.ID):
		return "next tier of another version"
	case res.Tier != nil && (len(res.Tier.Gifts) != 1 || !strings.HasPrefix(res.Tier.Gifts[0].SKU, tag)):
		return "gifts of another version"
	}
	return ""
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// failingClient injects faults by wrapping the client: it can fail the
// EXEC of refresh transactions and the next pipeline Exec.
type failingClient struct {
	redis.UniversalClient
	failExec     atomic.Bool
	failPipeline atomic.Int32 // fail the n-th next pipeline (1 = the next one)
}

var errInjected = errors.New("injected fault")

func (f *failingClient) Watch(ctx context.Context, fn func(*redis.Tx) error, keys ...string) error {
	return f.UniversalClient.Watch(ctx, func(tx *redis.Tx) error {
		if f.failExec.Load() {
			tx.AddHook(execFailer{})
		}
		return fn(tx)
	}, keys...)
}

func (f *failingClient) Pipeline() redis.Pipeliner {
	p := f.UniversalClient.Pipeline()
	if n := f.failPipeline.Load(); n > 0 {
		if f.failPipeline.Add(-1) == 0 {
			return failingPipe{p}
		}
	}
	return p
}

type failingPipe struct{ redis.Pipeliner }

func (p failingPipe) Exec(ctx context.Context) ([]redis.Cmder, error) {
	cmds, _ := p.Pipeliner.Exec(ctx)
	for _, c := range cmds {
		c.SetErr(errInjected)
	}
	return cmds, errInjected
}

// execFailer fails MULTI/EXEC batches without sending them, as a
// connection dying at EXEC would.
type execFailer struct{}

func (execFailer) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (execFailer) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (execFailer) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if c.Name() == "exec" {
				return errInjected
			}
		}
		return next(ctx, cmds)
	}
}

// TestFaultInjection: a refresh whose EXEC fails leaves the old version
// whole and readable, the report lists what was stored before the fault,
// and a failed gift round trip fails the call with the cause.
func TestFaultInjection(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		fc := &failingClient{UniversalClient: b.Client}
		c, err := New(fc, Options{Prefix: b.Prefix})
		if err != nil {
			t.Fatal(err)
		}
		v1 := versioned("v1", 2, 4)
		rep, err := c.Refresh(ctx, v1)
		if err != nil {
			t.Fatal(err)
		}
		oldVersion := rep.Promotions[0].Version
		keysBefore, _ := testredis.Keys(ctx, b.Client, b.Prefix)

		fc.failExec.Store(true)
		other := simplePromotion("other", 1)
		rep, err = c.Refresh(ctx, versioned("v2", 3, 5), other)
		if !errors.Is(err, errInjected) || !strings.Contains(err.Error(), `"flip"`) || len(rep.Promotions) != 0 {
			t.Fatalf("refresh with failing EXEC: %+v %v", rep, err)
		}
		fc.failExec.Store(false)
		keysAfter, _ := testredis.Keys(ctx, b.Client, b.Prefix)
		if len(keysAfter) != len(keysBefore) {
			t.Fatalf("keys %v -> %v", keysBefore, keysAfter)
		}
		r, err := c.Match(ctx, QuantityQuery("flip", 4), MatchOptions{Next: true, Gifts: true})
		if err != nil || r.Version != oldVersion || r.Tier.ID != "v1-tier1" || r.Tier.Gifts[0].SKU != "v1-gift" {
			t.Fatalf("after failed refresh: %+v %v", r, err)
		}

		// Failure on the second promotion: the first is stored and reported.
		fc.failPipeline.Store(0)
		c2, _ := New(&watchNth{UniversalClient: b.Client, failAt: 2}, Options{Prefix: b.Prefix})
		rep, err = c2.Refresh(ctx, versioned("v2", 3, 5), other)
		if !errors.Is(err, errInjected) || len(rep.Promotions) != 1 || rep.Promotions[0].Outcome != Updated || !strings.Contains(err.Error(), `"other"`) {
			t.Fatalf("partial batch: %+v %v", rep, err)
		}
		if _, err := c.Info(ctx, "other"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("failed promotion was written: %v", err)
		}

		// The gift round trip fails: the call reports the cause.
		fc.failPipeline.Store(2) // the 1st pipeline (tiers) passes, the 2nd (gifts) fails
		_, err = c.MatchCart(ctx, []Query{QuantityQuery("flip", 4), QuantityQuery("flip", 9)}, MatchOptions{Gifts: true})
		if !errors.Is(err, errInjected) {
			t.Fatalf("failing gift round trip: %v", err)
		}
	})
}

// watchNth fails the EXEC of the n-th refresh transaction.
type watchNth struct {
	redis.UniversalClient
	n, failAt int
}

func (w *watchNth) Watch(ctx context.Context, fn func(*redis.Tx) error, keys ...string) error {
	w.n++
	fail := w.n == w.failAt
	return w.UniversalClient.Watch(ctx, func(tx *redis.Tx) error {
		if fail {
			tx.AddHook(execFailer{})
		}
		return fn(tx)
	}, keys...)
}
