package storm

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
)

// BigCarts prices 150-line carts over 100 promotions (and 20-line carts
// beside them) from 16 clients, on the Redis path and through a near
// cache, with and without gifts, and prints p50/p99 and round trips per
// cart.
func BigCarts(ctx context.Context, url, prefix string, quick bool, out io.Writer) error {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	opt.ContextTimeoutEnabled = true
	opt.PoolSize = 32
	client := redis.NewClient(opt)
	defer client.Close()
	prefix += ":big"
	w, err := cache.New(client, cache.Options{Prefix: prefix})
	if err != nil {
		return err
	}
	const promos = 100
	ps := make([]gradient.Promotion, promos)
	for i := range ps {
		p := promotion(i, 0, 1)
		for k := range p.Tiers {
			if k%2 == 1 {
				p.Tiers[k].Gifts = []gradient.Gift{{SKU: fmt.Sprintf("gift-%d-%d", i, k), Qty: 1}}
			}
		}
		ps[i] = p
	}
	if _, err := w.Refresh(ctx, ps...); err != nil {
		return err
	}
	dur := 3 * time.Second
	if quick {
		dur = time.Second
	}
	fmt.Fprintf(out, "\nbig carts: 16 clients, %v per row, 100 promotions (5 tiers, gifts on 2)\n", dur)
	fmt.Fprintf(out, "| path | lines | gifts | carts | p50 | p99 | round trips / cart |\n|---|---|---|---|---|---|---|\n")
	for _, near := range []bool{false, true} {
		rt := &rtCount{}
		o := cache.Options{Prefix: prefix, Observer: rt}
		if near {
			o.NearCache = &cache.NearCacheOptions{}
		}
		c, err := cache.New(client, o)
		if err != nil {
			return err
		}
		if near {
			if err := warmNear(ctx, c, promos); err != nil {
				c.Close()
				return err
			}
		}
		for _, lines := range []int{20, 150} {
			for _, gifts := range []bool{false, true} {
				rt.n.Store(0)
				lat, carts := pricing(ctx, c, lines, promos, gifts, dur)
				path := "Redis"
				if near {
					path = "near"
				}
				fmt.Fprintf(out, "| %s | %d | %v | %d | %.0f µs | %.0f µs | %.2f |\n", path, lines, gifts, carts,
					pct(lat, 0.5), pct(lat, 0.99), float64(rt.n.Load())/float64(max(carts, 1)))
			}
		}
		c.Close()
	}
	return nil
}

func warmNear(ctx context.Context, c *cache.Cache, promos int) error {
	qs := make([]cache.Query, promos)
	for i := range qs {
		qs[i] = cache.QuantityQuery(promoID(i), 16)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := c.MatchCart(ctx, qs, cache.MatchOptions{Gifts: true}); err != nil {
			return err
		}
		if st := c.NearStats(); st.Tracking && st.Promotions >= promos {
			_, err := c.MatchCart(ctx, qs, cache.MatchOptions{Gifts: true}) // gift lists held too
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("near cache not warm in 10 s: %+v", c.NearStats())
		}
		time.Sleep(time.Millisecond)
	}
}

// pricing runs 16 clients pricing carts of lines lines (over promos
// promotions, so a 150-line cart repeats some) for dur.
func pricing(ctx context.Context, c *cache.Cache, lines, promos int, gifts bool, dur time.Duration) ([]int32, int) {
	// The carts are built before the clock starts: a cart service's
	// request decoding is not the library's work, so the timed loop
	// allocates only what AppendMatchCart does, and garbage collection runs as
	// often as that makes it.
	ids := make([]string, promos)
	for i := range ids {
		ids[i] = promoID(i)
	}
	carts := make([][][]cache.Query, 16)
	for g := range carts {
		r := rand.New(rand.NewPCG(uint64(g), uint64(lines)))
		carts[g] = make([][]cache.Query, cartsPerClient)
		for i := range carts[g] {
			qs := make([]cache.Query, lines)
			for k := range qs {
				qs[k] = cache.QuantityQuery(ids[r.IntN(promos)], int64(1+r.IntN(20)))
			}
			carts[g][i] = qs
		}
	}
	// Room for every latency at up to 16M lines/s over the 16 clients,
	// taken before the clock starts like the carts; sized by the row, so
	// the live heap (which paces garbage collection) stays near what the
	// recorded latencies need.
	latCap := int(dur.Seconds()*16e6) / 16 / lines
	lats := make([][]int32, 16)
	for g := range lats {
		lats[g] = make([]int32, 0, latCap)
	}
	var mu sync.Mutex
	var all []int32
	var wg sync.WaitGroup
	stop := time.Now().Add(dur)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := lats[g]
			// One result slice per client, reused for every cart, as a
			// cart service would: a near-cache cart then allocates nothing.
			var buf []cache.Result
			for n := 0; time.Now().Before(stop) && ctx.Err() == nil; n++ {
				qs := carts[g][n%cartsPerClient]
				t := time.Now()
				var err error
				if buf, err = c.AppendMatchCart(ctx, buf[:0], qs, cache.MatchOptions{Gifts: gifts}); err != nil {
					continue
				}
				lat = append(lat, int32(time.Since(t).Microseconds()))
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(all)
	return all, len(all)
}

// cartsPerClient is how many distinct carts each client cycles through.
const cartsPerClient = 64

// rtCount counts the round trips of MatchCart calls (match and gifts).
type rtCount struct {
	cache.NopObserver
	n atomic.Int64
}

func (r *rtCount) OnRoundTrips(op cache.Op, n int) {
	if op == cache.OpMatch || op == cache.OpGifts {
		r.n.Add(int64(n))
	}
}
