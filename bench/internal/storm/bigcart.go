package storm

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
)

// BigCarts prices 150-line carts over 100 promotions (and 20-line carts
// beside them), on the Redis path and through a near cache, with and
// without gifts: first from 16 clients in a closed loop (saturation:
// carts/s, p50, p99, p99.9 and round trips per cart), then one client
// alone and 16 clients in an open loop at fractions of the closed loop's
// carts/s (see load), on the Redis path without gifts and, beside it,
// from plain go-redis sending the same commands (rawFloor); and one
// client alone through the near cache, with and without gifts.
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
	const promos, clients = 100, 16
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
	dur, solo := 3*time.Second, time.Second
	if quick {
		dur, solo = time.Second, 500*time.Millisecond
	}
	fmt.Fprintf(out, "\nbig carts: 100 promotions (5 tiers, gifts on 2), lines of 1 to 20 items, %v per row\n", dur)
	fmt.Fprintf(out, "closed loop (saturation): %d clients, each starting its next cart when its last one returns\n", clients)
	fmt.Fprintf(out, "| path | lines | gifts | carts | carts/s | p50 | p99 | p99.9 | round trips / cart |\n|---|---|---|---|---|---|---|---|---|\n")
	// saturated is the closed loop's carts/s by row; the open loops below
	// offer fractions of the Redis path's without gifts.
	type row struct {
		near  bool
		lines int
		gifts bool
	}
	saturated := map[row]float64{}
	var onRedis, onNear *cache.Cache
	defer func() {
		for _, c := range []*cache.Cache{onRedis, onNear} {
			if c != nil {
				c.Close()
			}
		}
	}()
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
			onNear = c
			if err := warmNear(ctx, c, promos); err != nil {
				return err
			}
		} else {
			onRedis = c
		}
		for _, lines := range []int{20, 150} {
			for _, gifts := range []bool{false, true} {
				rt.n.Store(0)
				st, err := runLoad(ctx, c, load{clients: clients, lines: lines, promos: promos, gifts: gifts, dur: dur})
				if err != nil {
					return err
				}
				saturated[row{near, lines, gifts}] = st.rate()
				path := "Redis"
				if near {
					path = "near"
				}
				fmt.Fprintf(out, "| %s | %d | %v | %d | %.0f | %s | %s | %s | %.2f |\n", path, lines, gifts, len(st.lat), st.rate(),
					fmtLat(pct(st.lat, 0.5)), fmtLat(pct(st.lat, 0.99)), fmtLat(pct(st.lat, 0.999)),
					float64(rt.n.Load())/float64(max(len(st.lat), 1)))
				if st.errs > 0 {
					fmt.Fprintf(out, "(%d carts of that row failed and are not counted)\n", st.errs)
				}
			}
		}
	}

	fractions := []float64{0.10, 0.25, 0.50} // the header says so
	fmt.Fprintf(out, "\nbelow saturation: one client alone (closed loop, %v), then, on Redis, %d clients in an open loop offered 10%%, 25%% and 50%% of the Redis path's closed-loop carts/s above (%v per row)\n",
		solo, clients, dur)
	fmt.Fprintf(out, "| way | lines | clients | offered carts/s | achieved carts/s | carts | p50 | p99 | p99.9 | service p99 | late p99 |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	// The floor: the same carts' commands from plain go-redis (rawFloor),
	// at the Redis path's offered loads, so its rows say what the machine
	// and go-redis leave to the cache.
	floor := &rawFloor{client: client, prefix: prefix}
	if err := floor.check(ctx, promoID(0)); err != nil {
		return err
	}
	// The near cache's carts take microseconds: its open loops would
	// measure the pacer's wake-ups (hundreds of µs at these rates), not
	// the carts, so it gets the one-client rows only.
	ways := []struct {
		name  string
		c     *cache.Cache
		raw   *rawFloor
		gifts bool
		open  bool
	}{
		{name: "Redis path", c: onRedis, open: true},
		{name: "go-redis floor", c: onRedis, raw: floor, open: true},
		{name: "near", c: onNear},
		{name: "near, gifts", c: onNear, gifts: true},
	}
	for _, lines := range []int{20, 150} {
		for _, w := range ways {
			st, err := runLoad(ctx, w.c, load{clients: 1, lines: lines, promos: promos, gifts: w.gifts, dur: solo, raw: w.raw})
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "| %s | %d | 1 | closed loop | %.0f | %d | %s | %s | %s | | |\n", w.name, lines, st.rate(), len(st.lat),
				fmtLat(pct(st.lat, 0.5)), fmtLat(pct(st.lat, 0.99)), fmtLat(pct(st.lat, 0.999)))
			if !w.open {
				continue
			}
			for _, f := range fractions {
				rate := f * saturated[row{lines: lines}] // the Redis path's, without gifts
				st, err := runLoad(ctx, w.c, load{clients: clients, lines: lines, promos: promos, gifts: w.gifts, rate: rate, dur: dur, raw: w.raw})
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "| %s | %d | %d | %.0f (%.0f%%) | %.0f | %d | %s | %s | %s | %s | %s |\n", w.name, lines, clients, rate, f*100, st.rate(), len(st.lat),
					fmtLat(pct(st.lat, 0.5)), fmtLat(pct(st.lat, 0.99)), fmtLat(pct(st.lat, 0.999)),
					fmtLat(pct(st.svc, 0.99)), fmtLat(pct(st.late, 0.99)))
				if st.errs > 0 {
					fmt.Fprintf(out, "(%d carts of that row failed and are not counted)\n", st.errs)
				}
			}
		}
	}
	fmt.Fprintln(out, "Redis path and near: without gifts unless said; go-redis floor: the same carts' ZRANGEs (one per distinct")
	fmt.Fprintln(out, "promotion) pipelined by plain go-redis, nothing decoded, at the Redis path's offered loads.")
	fmt.Fprintln(out, "open loop: p50, p99 and p99.9 count from each cart's due time, so a cart that waited for its client's")
	fmt.Fprintln(out, "previous one is charged the wait; service: from the call's start; late: start minus due time.")
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
