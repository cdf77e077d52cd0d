package prometheus_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	tsprom "github.com/tierset/tierset/contrib/prometheus"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delaytest"
	"github.com/tierset/tierset/internal/testredis"
)

// TestPromlint: every family the collectors export passes promlint (no
// type in a name, counters end in _total, units in base units, help
// text on each).
func TestPromlint(t *testing.T) {
	t.Parallel()
	mfs := gatherAll(t)
	if len(mfs) < 20 {
		t.Fatalf("only %d families gathered", len(mfs))
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// TestQueueWorkersAndHealth: tierset_queue_workers counts the live pools
// and tierset_queue_health sets exactly one verdict: no_worker while a
// due task waits with nobody serving, then idle once a worker took it.
func TestQueueWorkersAndHealth(t *testing.T) {
	t.Parallel()
	b := testredis.Redis(t)
	q, err := delay.New(b.Client, "orders", delay.Options{Prefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(t.Context(), delay.Job{Key: "order-1"}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(tsprom.NewQueueCollector(tsprom.QueueOptions{Behind: time.Hour}, q))
	read := func() (workers float64, verdict string) {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		on := 0
		for _, mf := range mfs {
			switch mf.GetName() {
			case "tierset_queue_workers":
				workers = mf.GetMetric()[0].GetGauge().GetValue()
			case "tierset_queue_health":
				if n := len(mf.GetMetric()); n != 5 {
					t.Fatalf("%d verdict series, want 5", n)
				}
				for _, m := range mf.GetMetric() {
					if m.GetGauge().GetValue() == 1 {
						on++
						verdict = label(m, "verdict")
					}
				}
			}
		}
		if on != 1 {
			t.Fatalf("%d verdicts set, want exactly 1", on)
		}
		return workers, verdict
	}
	if w, v := read(); w != 0 || v != "no_worker" {
		t.Fatalf("before any worker: workers %v, verdict %q; want 0 and no_worker", w, v)
	}
	delaytest.StartWorker(t, t.Context(), q, func(context.Context, *delay.Task) error { return nil }, delay.PoolOptions{})
	deadline := time.Now().Add(10 * time.Second)
	for {
		w, v := read()
		if w == 1 && v == "idle" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with a worker that handled the task: workers %v, verdict %q; want 1 and idle", w, v)
		}
		time.Sleep(20 * time.Millisecond) // poll, with the deadline above
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
