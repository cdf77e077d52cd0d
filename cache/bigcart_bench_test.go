package cache

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// bigCartPromos are the promotions of the big-cart workload (bench
// -bigcart): 5 tiers at 1, 2, 4, 8, 16 items, gifts on the second and
// fourth.
func bigCartPromos(n int) []gradient.Promotion {
	ps := make([]gradient.Promotion, n)
	for i := range ps {
		p := gradient.Promotion{ID: "big" + strconv.Itoa(i), Metric: gradient.Quantity}
		for k := int64(0); k < 5; k++ {
			t := gradient.Tier{ID: "t" + strconv.FormatInt(k, 10), Threshold: decimal.NewFromInt(1 << k),
				Reward: gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(5 + k)}}
			if k%2 == 1 {
				t.Gifts = []gradient.Gift{{SKU: fmt.Sprintf("gift-%d-%d", i, k), Qty: 1}}
			}
			p.Tiers = append(p.Tiers, t)
		}
		ps[i] = p
	}
	return ps
}

// bigCarts are count random carts of lines lines over ps, 1 to 20 items a
// line, so a 150-line cart over 100 promotions repeats some.
func bigCarts(ps []gradient.Promotion, count, lines int, seed uint64) [][]Query {
	r := rand.New(rand.NewPCG(seed, uint64(lines)))
	carts := make([][]Query, count)
	for k := range carts {
		qs := make([]Query, lines)
		for i := range qs {
			qs[i] = QuantityQuery(ps[r.IntN(len(ps))].ID, int64(1+r.IntN(20)))
		}
		carts[k] = qs
	}
	return carts
}

// serverStats sums INFO commandstats (calls and microseconds of every
// command but INFO) and reads the server's CPU time (used_cpu_user +
// used_cpu_sys, µs), for what a benchmark's carts cost the server: the
// commands' own time, and everything, parsing and replies included.
func serverStats(ctx context.Context, tb testing.TB, c redis.UniversalClient) (calls, usec int64, cpu float64) {
	tb.Helper()
	info, err := c.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), ":"); ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, _ := strconv.ParseFloat(v, 64)
			cpu += f * 1e6
		}
		if !strings.HasPrefix(l, "cmdstat_") || strings.HasPrefix(l, "cmdstat_info:") {
			continue
		}
		for _, f := range strings.Split(strings.TrimSpace(l[strings.IndexByte(l, ':')+1:]), ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				calls += n
			case "usec":
				usec += n
			}
		}
	}
	return calls, usec, cpu
}

// BenchmarkBigCart prices 150-line carts over 100 promotions (and 20-line
// ones) on the Redis path and from the near cache, with and without
// gifts. It also reports per cart the server's commands, their own
// time (INFO commandstats) and its CPU time (INFO cpu), meaningful on a
// private server only this benchmark uses, and the CPU time of this
// process (garbage collection included).
func BenchmarkBigCart(b *testing.B) {
	if testredis.URL() == "" {
		b.Skip("big carts are measured on a real Redis: " + testredis.NoRealWhy())
	}
	// api=append (near only) prices every cart into one reused result
	// slice with AppendMatchCart, as a cart service would.
	type row struct {
		impl   string
		append bool
	}
	for _, r := range []row{{"redis", false}, {"near", false}, {"near", true}} {
		impl := r.impl
		for _, lines := range []int{20, 150} {
			for _, gifts := range []bool{false, true} {
				be := testredis.Redis(b)
				name := fmt.Sprintf("impl=%s/lines=%d/gifts=%v", impl, lines, gifts)
				if r.append {
					name += "/api=append"
				}
				b.Run(name, func(b *testing.B) {
					ctx := context.Background()
					w := newCache(b, be, Options{})
					ps := bigCartPromos(100)
					if _, err := w.Refresh(ctx, ps...); err != nil {
						b.Fatal(err)
					}
					c := w
					if impl == "near" {
						c = newNearCache(b, nearClient(b, be), be.Prefix, Options{})
					}
					carts := bigCarts(ps, 64, lines, 1)
					opt := MatchOptions{Gifts: gifts}
					for _, qs := range carts { // warms the near cache's ladders and gift lists
						if _, err := c.MatchCart(ctx, qs, opt); err != nil {
							b.Fatal(err)
						}
					}
					calls0, usec0, cpu0 := serverStats(ctx, b, be.Client)
					own0 := cpuTime(b)
					k := 0
					b.ReportAllocs()
					b.ResetTimer()
					var buf []Result
					for b.Loop() {
						var err error
						if r.append {
							buf, err = c.AppendMatchCart(ctx, buf[:0], carts[k%len(carts)], opt)
						} else {
							_, err = c.MatchCart(ctx, carts[k%len(carts)], opt)
						}
						if err != nil {
							b.Fatal(err)
						}
						k++
					}
					b.StopTimer()
					own1 := cpuTime(b)
					calls1, usec1, cpu1 := serverStats(ctx, b, be.Client)
					b.ReportMetric(float64((own1-own0).Microseconds())/float64(b.N), "client-cpu-µs/cart")
					b.ReportMetric(float64(calls1-calls0)/float64(b.N), "cmds/cart")
					b.ReportMetric(float64(usec1-usec0)/float64(b.N), "cmd-µs/cart")
					b.ReportMetric((cpu1-cpu0)/float64(b.N), "server-cpu-µs/cart")
				})
			}
		}
	}
}

// BenchmarkBigCartOneClient is one client pricing big carts on the Redis
// path back to back (AppendMatchCart into one reused slice, no gifts),
// and reports the latency of its carts (p50, p99, p99.9) and the garbage
// collections the process ran per 1,000 carts, for what the collector
// adds to the tail. Real Redis only (TIERSET_REDIS_URL), best on a
// private server; run it at several GOGC values to see that share.
func BenchmarkBigCartOneClient(b *testing.B) {
	if testredis.URL() == "" {
		b.Skip("big carts are measured on a real Redis: " + testredis.NoRealWhy())
	}
	for _, lines := range []int{20, 150} {
		be := testredis.Redis(b)
		b.Run(fmt.Sprintf("lines=%d", lines), func(b *testing.B) {
			ctx := context.Background()
			c := newCache(b, be, Options{})
			ps := bigCartPromos(100)
			if _, err := c.Refresh(ctx, ps...); err != nil {
				b.Fatal(err)
			}
			carts := bigCarts(ps, 64, lines, 1)
			var buf []Result
			for _, qs := range carts {
				var err error
				if buf, err = c.AppendMatchCart(ctx, buf[:0], qs, MatchOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			lat := make([]time.Duration, 0, 1<<16)
			b.ReportAllocs()
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			k := 0
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				var err error
				if buf, err = c.AppendMatchCart(ctx, buf[:0], carts[k%len(carts)], MatchOptions{}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				k++
			}
			b.StopTimer()
			runtime.ReadMemStats(&ms1)
			slices.Sort(lat)
			at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) }
			b.ReportMetric(at(0.5), "p50-µs")
			b.ReportMetric(at(0.99), "p99-µs")
			b.ReportMetric(at(0.999), "p99.9-µs")
			b.ReportMetric(float64(ms1.NumGC-ms0.NumGC)*1000/float64(b.N), "gc/1k-carts")
		})
	}
}
