package prometheus_test

import (
	"math"
	"os"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	tsprom "github.com/tierset/tierset/contrib/prometheus"
	"github.com/tierset/tierset/delay"
)

// TestReadmeSnippetIsExample: every line of README.md's Go snippet is a
// line of Example, in order, so the snippet is code that compiles and
// runs (as the Example does) rather than prose that drifts.
func TestReadmeSnippetIsExample(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```go\n")
	snippet, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README.md has no ```go snippet")
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(src), "\n")
	at := 0
	for _, want := range strings.Split(snippet, "\n") {
		want = strings.TrimSpace(want)
		if want == "" {
			continue
		}
		for at < len(lines) && strings.TrimSpace(lines[at]) != want {
			at++
		}
		if at == len(lines) {
			t.Fatalf("README snippet line %q is not in Example (in order)", want)
		}
		at++
	}
}

// TestSeriesFromTheStartNoNaN: with DelayOptions.Queues every delay
// series of the queue exists at 0 before any event, and no sample of any
// collector is NaN (the queue lateness _sum included).
func TestSeriesFromTheStartNoNaN(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	q, err := delay.New(rdb, "orders", delay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dc := tsprom.NewDelayCollector(tsprom.DelayOptions{Queues: []string{"orders"}})
	reg := prometheus.NewRegistry()
	reg.MustRegister(dc, tsprom.NewQueueCollector(tsprom.QueueOptions{}, q), tsprom.NewCacheCollector(tsprom.CacheOptions{}))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]int{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			have[mf.GetName()]++
			for _, v := range []float64{m.GetCounter().GetValue(), m.GetGauge().GetValue(), m.GetHistogram().GetSampleSum()} {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Errorf("%s %v: %v", mf.GetName(), m.GetLabel(), v)
				}
			}
		}
	}
	for name, min := range map[string]int{
		"tierset_delay_enqueued_total": 2, "tierset_delay_delivered_total": 1, "tierset_delay_acked_total": 1,
		"tierset_delay_retries_total": 1, "tierset_delay_dead_total": 1, "tierset_delay_sweep_returned_total": 1,
		"tierset_delay_sweep_dead_total": 1, "tierset_delay_errors_total": 8, "tierset_delay_losses_total": 5,
		"tierset_delay_warnings_total": 4, "tierset_delay_lateness_seconds": 1, "tierset_queue_lateness_seconds": 1,
		"tierset_queue_tasks": 5, "tierset_queue_paused": 1, "tierset_queue_rate_limit_per_second": 1,
		"tierset_queue_high_water": 1, "tierset_queue_high_water_space": 1,
	} {
		if have[name] < min {
			t.Errorf("%s: %d series before any event, want %d", name, have[name], min)
		}
	}
	if err := q.Pause(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := q.SetRate(t.Context(), delay.Rate{PerSecond: 50}); err != nil {
		t.Fatal(err)
	}
	if mfs, err = reg.Gather(); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			got[mf.GetName()] += m.GetGauge().GetValue()
		}
	}
	if got["tierset_queue_paused"] != 1 || got["tierset_queue_rate_limit_per_second"] != 50 || got["tierset_queue_high_water_space"] <= 0 {
		t.Errorf("after Pause and SetRate(50): paused %v, rate %v, high-water space %v",
			got["tierset_queue_paused"], got["tierset_queue_rate_limit_per_second"], got["tierset_queue_high_water_space"])
	}
}
