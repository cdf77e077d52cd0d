// Command expvar shows how to wire the cache's and the delay queue's
// Observer interfaces to the standard library's expvar package: no new
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

// queueMetrics publishes delay-queue events; lateness goes into a
// histogram whose percentiles are published through expvar.Func.
type queueMetrics struct {
	delay.NopObserver
	m        *expvar.Map
	lateness *delay.Histogram
}

func (o queueMetrics) OnEnqueue(_ string, duplicate bool) {
	if duplicate {
		o.m.Add("enqueue_duplicates", 1)
		return
	}
	o.m.Add("enqueued", 1)
}

func (o queueMetrics) OnDelivered(_ string, lateness time.Duration) {
	o.m.Add("delivered", 1)
	o.lateness.Record(lateness)
}

func (o queueMetrics) OnAck(string)                         { o.m.Add("acked", 1) }
func (o queueMetrics) OnRetry(string, int, time.Duration)   { o.m.Add("retries", 1) }
func (o queueMetrics) OnDead(string, int)                   { o.m.Add("dead_letters", 1) }
func (o queueMetrics) OnSweep(_ string, returned, dead int) { o.m.Add("swept", int64(returned+dead)) }
func (o queueMetrics) OnError(_ string, op string, _ error) { o.m.Add("errors_"+op, 1) }

// Published once per process: expvar panics on a second registration.
var (
	cacheVars = expvar.NewMap("tierset_cache")
	queueVars = expvar.NewMap("tierset_delay")
	lateness  = &delay.Histogram{}
)

func init() {
	expvar.Publish("tierset_delay_lateness", expvar.Func(func() any {
		return map[string]any{
			"count": lateness.Count(),
			"p50":   lateness.Percentile(50).String(),
			"p99":   lateness.Percentile(99).String(),
			"max":   lateness.Max().String(),
		}
	}))
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

	q, err := delay.New(client, "reservations", delay.Options{Observer: queueMetrics{m: queueVars, lateness: lateness}})
	if err != nil {
		return err
	}
	for _, key := range []string{"order-1", "order-2", "order-3"} {
		if _, err := q.Enqueue(ctx, delay.Job{Key: key, When: delay.After(0)}); err != nil {
			return err
		}
	}
	b, err := q.Take(ctx, 3)
	if err != nil {
		return err
	}
	for i, t := range b.Tasks {
		if i == 0 {
			if _, err := q.Kill(ctx, t, errors.New("payment service unavailable")); err != nil {
				return err
			}
			continue
		}
		if err := q.Ack(ctx, t); err != nil {
			return err
		}
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
