package prometheus_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tierset/tierset/cache"
	tsprom "github.com/tierset/tierset/contrib/prometheus"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/exampleredis"
)

// Wire the cache and a queue to a registry and serve /metrics.
func Example() {
	rdb, mr := exampleredis.Start() // a program: redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer exampleredis.Stop(rdb, mr)
	ctx := context.Background()

	cacheMetrics := tsprom.NewCacheCollector(tsprom.CacheOptions{MaxPromotions: 500})
	delayMetrics := tsprom.NewDelayCollector(tsprom.DelayOptions{})
	c, err := cache.New(rdb, cache.Options{Observer: cacheMetrics})
	if err != nil {
		panic(err)
	}
	q, err := delay.New(rdb, "orders", delay.Options{Observer: delayMetrics.Observer()})
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(cacheMetrics, delayMetrics, tsprom.NewQueueCollector(tsprom.QueueOptions{}, q))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	_ = mux // http.ListenAndServe(":9090", mux) in a real program

	// 2 round trips: the match, and the re-read that tells not found from damaged
	_, _ = c.Match(ctx, cache.QuantityQuery("no-such-promotion", 3), cache.MatchOptions{})
	_, _ = q.Enqueue(ctx, delay.Job{Key: "order-1"})
	mfs, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			if v == 0 || !strings.HasSuffix(mf.GetName(), "_total") && mf.GetName() != "tierset_queue_tasks" {
				continue
			}
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			fmt.Println(mf.GetName(), strings.Join(labels, ","), v)
		}
	}
	// Output:
	// tierset_cache_lookups_total outcome=not_found 1
	// tierset_cache_round_trips_total op=match 2
	// tierset_delay_enqueued_total queue=orders,result=new 1
	// tierset_queue_tasks queue=orders,state=ready 1
}
