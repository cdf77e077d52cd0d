package prometheus_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/cache"
	tsprom "github.com/tierset/tierset/contrib/prometheus"
	"github.com/tierset/tierset/delay"
)

// Wire the cache and a queue to a registry and serve /metrics.
func Example() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	ctx := context.Background()

	cacheMetrics := tsprom.NewCacheCollector(tsprom.CacheOptions{MaxPromotions: 500})
	delayMetrics := tsprom.NewDelayCollector(tsprom.DelayOptions{})
	c, err := cache.New(rdb, cache.Options{Observer: cacheMetrics})
	if err != nil {
		panic(err)
	}
	q, err := delay.New(rdb, "orders", delay.Options{Observer: delayMetrics})
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
