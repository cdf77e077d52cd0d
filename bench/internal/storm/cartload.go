package storm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/tierset/tierset/cache"
)

// load is one row of the big-cart phase: clients pricing carts of lines
// lines over promos promotions for dur, in a closed loop (rate 0: each
// client starts its next cart when its last one returns, so the row
// measures saturation) or an open loop at rate carts/s over all clients.
//
// Open loop: client k's n-th cart is due at (k/clients + n) × clients/rate
// after the start, whatever happened to its earlier carts; latency counts
// from that due time, so a cart that waits for its client's previous one
// is charged the wait and a stall is not hidden by the carts it
// prevented (coordinated omission), as wrk2 and memtier's rate limiting
// measure.
type load struct {
	clients, lines, promos int
	gifts                  bool
	rate                   float64
	dur                    time.Duration
	// raw prices each cart as the floor does (rawFloor) instead of
	// through the cache.
	raw *rawFloor
}

// loadStats is what a row measured, latencies in µs, sorted.
type loadStats struct {
	lat  []int32 // open loop: from the due time; closed loop: from the start
	svc  []int32 // open loop: from the start, the call's own time
	late []int32 // open loop: start minus due time
	errs int
	// elapsed runs from the start (the first due time) to the last
	// return.
	elapsed time.Duration
}

func (s *loadStats) rate() float64 { return float64(len(s.lat)) / s.elapsed.Seconds() }

// runLoad runs l on c. The carts (cartsPerClient each, random lines of 1
// to 20 items) and the room for every latency are made before the clock
// starts: a cart service's request decoding is not the library's work,
// so the timed loop allocates only what AppendMatchCart does, and
// garbage collection runs as often as that makes it.
func runLoad(ctx context.Context, c *cache.Cache, l load) (*loadStats, error) {
	ids := make([]string, l.promos)
	for i := range ids {
		ids[i] = promoID(i)
	}
	carts := make([][][]cache.Query, l.clients)
	for g := range carts {
		r := rand.New(rand.NewPCG(uint64(g), uint64(l.lines)))
		carts[g] = make([][]cache.Query, cartsPerClient)
		for i := range carts[g] {
			qs := make([]cache.Query, l.lines)
			for k := range qs {
				qs[k] = cache.QuantityQuery(ids[r.IntN(l.promos)], int64(1+r.IntN(20)))
			}
			carts[g][i] = qs
		}
	}
	if l.raw != nil {
		l.raw.prepare(carts)
	}
	// Closed loop: room for up to 16M lines/s over all clients; open
	// loop: for the carts due, plus slack. Sized by the row, so the live
	// heap (which paces garbage collection) stays near what the recorded
	// latencies need.
	perClient := int(l.dur.Seconds()*16e6) / l.clients / l.lines
	var interval time.Duration
	if l.rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(l.clients) / l.rate)
		perClient = int(l.dur/interval) + 2
	}
	type clientStats struct {
		lat, svc, late []int32
		errs           int
		last           time.Duration
		err            error
	}
	cs := make([]clientStats, l.clients)
	for g := range cs {
		cs[g].lat = make([]int32, 0, perClient)
		if l.rate > 0 {
			cs[g].svc = make([]int32, 0, perClient)
			cs[g].late = make([]int32, 0, perClient)
		}
	}
	us := func(d time.Duration) int32 { return int32(d.Microseconds()) }
	opt := cache.MatchOptions{Gifts: l.gifts}
	price := c.AppendMatchCart
	if l.raw != nil {
		price = l.raw.price
	}
	// The clients start together a little after their goroutines do.
	t0 := time.Now().Add(5 * time.Millisecond)
	var wg sync.WaitGroup
	for g := range l.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := &cs[g]
			// One result slice per client, reused for every cart, as a
			// cart service would.
			var buf []cache.Result
			var err error
			if l.rate == 0 {
				time.Sleep(time.Until(t0))
				for n := 0; ctx.Err() == nil; n++ {
					start := time.Since(t0)
					if start >= l.dur {
						break
					}
					buf, err = price(ctx, buf[:0], carts[g][n%cartsPerClient], opt)
					st.last = time.Since(t0)
					if err != nil {
						st.errs++
						continue
					}
					st.lat = append(st.lat, us(st.last-start))
				}
				return
			}
			p, err := newPacer(t0)
			if err != nil {
				st.err = err
				return
			}
			defer p.close()
			first := interval * time.Duration(g) / time.Duration(l.clients)
			for n := 0; ctx.Err() == nil; n++ {
				due := first + time.Duration(n)*interval
				if due >= l.dur {
					break
				}
				if time.Since(t0) < due {
					if st.err = p.waitUntil(due); st.err != nil {
						return
					}
				}
				start := time.Since(t0)
				buf, err = price(ctx, buf[:0], carts[g][n%cartsPerClient], opt)
				st.last = time.Since(t0)
				if err != nil {
					st.errs++
					continue
				}
				st.lat = append(st.lat, us(st.last-due))
				st.svc = append(st.svc, us(st.last-start))
				st.late = append(st.late, us(start-due))
			}
		}()
	}
	wg.Wait()
	out := &loadStats{}
	for g := range cs {
		if cs[g].err != nil {
			return nil, fmt.Errorf("open-loop pacing: %w", cs[g].err)
		}
		out.lat = append(out.lat, cs[g].lat...)
		out.svc = append(out.svc, cs[g].svc...)
		out.late = append(out.late, cs[g].late...)
		out.errs += cs[g].errs
		out.elapsed = max(out.elapsed, cs[g].last)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	slices.Sort(out.lat)
	slices.Sort(out.svc)
	slices.Sort(out.late)
	return out, nil
}

// cartsPerClient is how many distinct carts each client cycles through.
const cartsPerClient = 64

// fmtLat formats a latency in µs: µs below a millisecond, else ms.
func fmtLat(us float64) string {
	if us < 1000 {
		return fmt.Sprintf("%.0f µs", us)
	}
	return fmt.Sprintf("%.2f ms", us/1000)
}
