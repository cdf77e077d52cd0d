// Command expvar shows how to wire the cache's and the delay queue's
// Observers to the standard library's expvar package: no new
// dependency, and the counters appear at /debug/vars of any HTTP server
// that imports expvar. The same few lines with a Prometheus or
// OpenTelemetry counter instead of expvar.Map.Add wire those.
//
// It runs on an embedded miniredis: it warms the sample rules, matches a
// few cart lines, runs a few delay-queue tasks, and prints the counters.
//
//	go run ./examples/expvar
package main

import (
	"context"
	"encoding/json"
	"errors"
	"expvar"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/rules"
	"github.com/tierset/tierset/warm"
)

// cacheMetrics publishes cache events as expvar counters.
type cacheMetrics struct {
	cache.NopObserver // future Observer methods default to no-ops
	m                 *expvar.Map
}

func (o cacheMetrics) OnLookup(_ string, outcome cache.Outcome, d time.Duration) {
	o.m.Add("lookups", 1)
	o.m.Add("lookup_"+outcome.String(), 1)
	o.m.Add("lookup_ns_total", d.Nanoseconds())
}

func (o cacheMetrics) OnRoundTrips(op cache.Op, n int) { o.m.Add("round_trips_"+op.String(), int64(n)) }

func (o cacheMetrics) OnRefresh(_ string, outcome cache.RefreshOutcome) {
	o.m.Add("refresh_"+outcome.String(), 1)
}

func (o cacheMetrics) OnDecodeError(string, string, error) { o.m.Add("decode_errors", 1) }

// queueObserver publishes delay-queue events: an Observer sets only the
// funcs of the events it wants. Lateness is summed and its maximum kept,
// published through expvar.Func.
func queueObserver(m *expvar.Map, l *latenessStats) delay.Observer {
	return delay.Observer{
		OnEnqueue: func(_ string, duplicate bool) {
			if duplicate {
				m.Add("enqueue_duplicates", 1)
				return
			}
			m.Add("enqueued", 1)
		},
		OnDelivered: func(_ string, lateness time.Duration) {
			m.Add("delivered", 1)
			l.record(lateness)
		},
		OnAck:   func(string) { m.Add("acked", 1) },
		OnRetry: func(string, int, time.Duration) { m.Add("retries", 1) },
		OnDead:  func(string, int) { m.Add("dead_letters", 1) },
		OnSweep: func(_ string, returned, dead int) { m.Add("swept", int64(returned+dead)) },
		OnError: func(_ string, op string, _ error) { m.Add("errors_"+op, 1) },
	}
}

// latenessStats counts deliveries, sums their lateness and keeps the
// largest.
type latenessStats struct {
	mu         sync.Mutex
	count      int64
	total, max time.Duration
}

func (l *latenessStats) record(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.count++
	l.total += d
	l.max = max(l.max, d)
}

func (l *latenessStats) snapshot() map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	mean := time.Duration(0)
	if l.count > 0 {
		mean = l.total / time.Duration(l.count)
	}
	return map[string]any{"count": l.count, "mean": mean.String(), "max": l.max.String()}
}

// Published once per process: expvar panics on a second registration.
var (
	cacheVars = expvar.NewMap("tierset_cache")
	queueVars = expvar.NewMap("tierset_delay")
	lateness  = &latenessStats{}
)

func init() {
	expvar.Publish("tierset_delay_lateness", expvar.Func(func() any { return lateness.snapshot() }))
}

func main() {
	if err := run(context.Background(), "examples/rules.json", os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "expvar example:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, rulesPath string, w io.Writer) error {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		return err
	}
	defer m.Close()
	client := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()

	c, err := cache.New(client, cache.Options{Observer: cacheMetrics{m: cacheVars}})
	if err != nil {
		return err
	}
	promos, err := rules.ParseFile(rulesPath, rules.Options{})
	if err != nil {
		return err
	}
	if _, err := warm.Warm(ctx, c, promos, warm.Options{}); err != nil {
		return err
	}
	cart := []cache.Query{
		cache.QuantityQuery("qty-3-5-10", 7),                                   // hit
		cache.AmountQuery("10086", decimal.RequireFromString("150.00")),        // hit with gifts
		cache.AmountQuery("10086", decimal.RequireFromString("20.00")),         // no tier
		cache.AmountQuery("no-such-promotion", decimal.RequireFromString("1")), // not found
	}
	if _, err := c.MatchCart(ctx, cart, cache.MatchOptions{Next: true, Gifts: true}); err != nil {
		return err
	}

	q, err := delay.New(client, "reservations", delay.Options{Observer: queueObserver(queueVars, lateness)})
	if err != nil {
		return err
	}
	for _, key := range []string{"order-1", "order-2", "order-3"} {
		if _, err := q.Enqueue(ctx, delay.Job{Key: key, When: delay.After(0)}); err != nil {
			return err
		}
	}
	// A pool runs the handler: order-1 fails for good (dead-lettered),
	// the others succeed (acked). Run returns once its context ends, with
	// every outcome applied.
	p, err := delay.NewPool(delay.PoolOptions{Heartbeat: -1})
	if err != nil {
		return err
	}
	handled := make(chan struct{}, 3)
	err = p.Add(q, func(_ context.Context, t *delay.Task) error {
		defer func() { handled <- struct{}{} }()
		if t.Key == "order-1" {
			return delay.Permanent(errors.New("payment service unavailable"))
		}
		return nil
	}, delay.QueueOptions{})
	if err != nil {
		return err
	}
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	stopped := make(chan error, 1)
	go func() { stopped <- p.Run(pctx) }()
	for range 3 {
		select {
		case <-handled:
		case err := <-stopped:
			return fmt.Errorf("pool stopped early: %w", err)
		}
	}
	stop()
	if err := <-stopped; !errors.Is(err, context.Canceled) {
		return err
	}

	for _, name := range []string{"tierset_cache", "tierset_delay", "tierset_delay_lateness"} {
		v := expvar.Get(name)
		var pretty any
		if err := json.Unmarshal([]byte(v.String()), &pretty); err != nil {
			return err
		}
		out, _ := json.Marshal(pretty) // re-marshalled: keys sorted, one line
		fmt.Fprintf(w, "%s %s\n", name, out)
	}
	return nil
}
