// Command cachecost drives the tier cache through three paths (a refresh
// of unchanged promotions, a refresh of changed ones, and 20-line carts)
// against a redis-server that runs under valgrind's callgrind, dumps
// callgrind's counters after each phase, and prints the bytes sent and
// received per operation, so each phase's server cost comes out as an
// instruction count: the same for the same build and inputs whatever
// else the machine is doing. Run it through scripts/cache-server-cost.sh,
// which starts that server. It sets gradient.Promotion.Revision when the
// build has it (by reflection), so the same program measures a build
// before revisions and one with them.
package main

import (
	"context"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/bench/internal/callgrind"
	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
)

func main() { callgrind.Main("cachecost", "127.0.0.1:6394", 2000, "promotions, and carts", run) }

// counted counts the bytes of every connection it dials.
type counted struct {
	net.Conn
	in, out *atomic.Int64
}

func (c counted) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.in.Add(int64(n))
	return n, err
}

func (c counted) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.out.Add(int64(n))
	return n, err
}

// promo is promotion i at revision rev: 10 tiers, gifts on two, content
// that changes with rev.
func promo(i int, rev int64) gradient.Promotion {
	p := gradient.Promotion{ID: "cost-" + strconv.Itoa(i), Metric: gradient.Quantity, MinorDigits: 2}
	for k := 0; k < 10; k++ {
		t := gradient.Tier{ID: "t" + strconv.Itoa(k), Threshold: decimal.NewFromInt(int64(2 + 3*k)),
			Reward: gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(1 + (int64(k)+rev)%50)}}
		if k%5 == 0 {
			t.Gifts = []gradient.Gift{{SKU: "sku-" + strconv.Itoa(k), Qty: 1, Name: "gift"}}
		}
		p.Tiers = append(p.Tiers, t)
	}
	if f := reflect.ValueOf(&p).Elem().FieldByName("Revision"); f.IsValid() {
		f.SetInt(rev)
	}
	return p
}

func run(addr, pid string, n int) error {
	ctx := context.Background()
	var in, out atomic.Int64
	c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: time.Minute, WriteTimeout: time.Minute, ContextTimeoutEnabled: true,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return counted{conn, &in, &out}, nil
		}})
	defer c.Close()
	cc, err := cache.New(c, cache.Options{Prefix: "cachecost"})
	if err != nil {
		return err
	}
	dump := func(phase string) error {
		if pid == "" {
			return nil
		}
		return callgrind.Dump(pid, phase)
	}
	phase := func(name string, ops int, fn func(i int) error) error {
		in0, out0 := in.Load(), out.Load()
		for i := 0; i < ops; i++ {
			if err := fn(i); err != nil {
				return fmt.Errorf("%s %d: %w", name, i, err)
			}
		}
		if err := dump(name); err != nil {
			return err
		}
		fmt.Printf("%-10s %6d ops  %6.0f bytes sent  %6.0f bytes received per op\n", name, ops,
			float64(out.Load()-out0)/float64(ops), float64(in.Load()-in0)/float64(ops))
		return nil
	}
	refresh := func(rev int64, want func(cache.RefreshReport) bool) func(i int) error {
		return func(i int) error {
			rep, err := cc.Refresh(ctx, promo(i, rev))
			if err == nil && !want(rep) {
				err = fmt.Errorf("report %+v", rep)
			}
			return err
		}
	}
	if err := c.Ping(ctx).Err(); err != nil {
		return err
	}
	if err := phase("setup", n, refresh(1, func(r cache.RefreshReport) bool { return r.Added == 1 })); err != nil {
		return err
	}
	if err := phase("unchanged", n, refresh(1, func(r cache.RefreshReport) bool { return r.Unchanged == 1 })); err != nil {
		return err
	}
	if err := phase("changed", n, refresh(2, func(r cache.RefreshReport) bool { return r.Updated == 1 })); err != nil {
		return err
	}
	cart := make([]cache.Query, 20)
	return phase("cart", n, func(i int) error {
		for k := range cart {
			cart[k] = cache.QuantityQuery("cost-"+strconv.Itoa((i+k*97)%n), int64(1+(i+k)%30))
		}
		rs, err := cc.MatchCart(ctx, cart, cache.MatchOptions{})
		for _, r := range rs {
			if r.Err != nil && r.Err != cache.ErrNoTier {
				return r.Err
			}
		}
		return err
	})
}
