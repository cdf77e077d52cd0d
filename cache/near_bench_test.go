package cache

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/tierset/tierset/internal/testredis"
)

// BenchmarkNear compares the near cache with the library's Redis path
// and raw go-redis issuing the same ZRANGE (one line, and a pipelined
// 20-line cart), at 3, 300 and 3000 tiers. The near cache needs client
// tracking, so it runs only on real backends (TIERSET_REDIS_URL,
// TIERSET_REDIS_CLUSTER). ns/line is the figure to compare across rows.
func BenchmarkNear(b *testing.B) {
	var backends []func(testing.TB) *testredis.Backend
	if testredis.URL() != "" {
		backends = append(backends, testredis.Redis)
	}
	if len(testredis.ClusterAddrs()) > 0 {
		backends = append(backends, testredis.Cluster)
	}
	if len(backends) == 0 {
		b.Skip("the near cache needs client tracking: " + testredis.NoRealWhy() + ", and TIERSET_REDIS_CLUSTER unset")
	}
	for _, mk := range backends {
		for _, tiers := range []int{3, 300, 3000} {
			for _, lines := range []int{1, 20} {
				for _, impl := range []string{"near", "library", "raw"} {
					be := mk(b)
					name := fmt.Sprintf("tiers=%d/lines=%d/impl=%s/backend=%s", tiers, lines, impl, be.Name)
					b.Run(name, func(b *testing.B) { benchNear(b, be, tiers, lines, impl) })
				}
			}
		}
	}
}

func benchNear(b *testing.B, be *testredis.Backend, tiers, lines int, impl string) {
	ctx := context.Background()
	w := newCache(b, be, Options{})
	ps := giftPromos(lines, tiers)
	if _, err := w.Refresh(ctx, ps...); err != nil {
		b.Fatal(err)
	}
	qs := make([]Query, lines)
	for i := range qs {
		qs[i] = QuantityQuery(ps[i].ID, int64(1+(i*37)%tiers))
	}
	c := w
	if impl == "near" {
		c = newNearCache(b, nearClient(b, be), be.Prefix, Options{})
	}
	var run func() error
	switch {
	case impl != "raw" && lines == 1:
		run = func() error { _, err := c.Match(ctx, qs[0], MatchOptions{}); return err }
	case impl != "raw":
		run = func() error { _, err := c.MatchCart(ctx, qs, MatchOptions{}); return err }
	default:
		run = rawRun(ctx, be, c, qs)
	}
	benchLoop(b, run) // its first run warms the ladders
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(lines), "ns/line")
	if impl == "near" {
		// Prove the rows measure memory: every line after the warm-up was
		// a near hit.
		st := c.NearStats()
		if st.Hits < int64(b.N*lines) {
			b.Fatalf("near row: %d hits for %d lines", st.Hits, b.N*lines)
		}
	}
}

// BenchmarkNearParallel is the near cache's Match under concurrent
// callers (GOMAXPROCS goroutines), at 3 and 3000 tiers.
func BenchmarkNearParallel(b *testing.B) {
	if testredis.URL() == "" {
		b.Skip("the near cache needs client tracking: " + testredis.NoRealWhy())
	}
	for _, tiers := range []int{3, 3000} {
		be := testredis.Redis(b)
		b.Run("tiers="+strconv.Itoa(tiers), func(b *testing.B) {
			ctx := context.Background()
			w := newCache(b, be, Options{})
			p := simplePromotion("par", seq(tiers)...)
			if _, err := w.Refresh(ctx, p); err != nil {
				b.Fatal(err)
			}
			c := newNearCache(b, nearClient(b, be), be.Prefix, Options{})
			if _, err := c.Match(ctx, QuantityQuery("par", 2), MatchOptions{}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				k := int64(0)
				for pb.Next() {
					k++
					if _, err := c.Match(ctx, QuantityQuery("par", 1+k%int64(tiers)), MatchOptions{}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
