package prometheus_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	tsprom "github.com/tierset/tierset/contrib/prometheus"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/periodic"
)

// TestPeriodicCollector: two schedulers run one job (200 ms ticks) and
// feed one collector; the job is paused a while, then resumed. Once both
// stop, every tick from the first through the guard was counted exactly
// once: enqueued (as many as the job's tasks in the queue) or missed
// while paused. The series exist at 0 before the first tick.
func TestPeriodicCollector(t *testing.T) {
	b := testredis.Redis(t)
	ctx := t.Context()
	pc := tsprom.NewPeriodicCollector(tsprom.PeriodicOptions{Jobs: []tsprom.PeriodicJob{{Queue: "jobs", Name: "report"}}})
	reg := pedanticRegistry(pc)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP tierset_periodic_ticks_missed_total Ticks of a periodic job that passed without a task, handled by this process, by reason: catchup (dropped by the job's catch-up policy) or paused.
# TYPE tierset_periodic_ticks_missed_total counter
tierset_periodic_ticks_missed_total{job="report",queue="jobs",reason="catchup"} 0
tierset_periodic_ticks_missed_total{job="report",queue="jobs",reason="paused"} 0
`), "tierset_periodic_ticks_missed_total"); err != nil {
		t.Fatalf("before any tick: %v", err)
	}
	q, err := delay.New(b.Client, "jobs", delay.Options{Prefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	const period = 200 * time.Millisecond
	rctx, cancel := context.WithCancel(ctx)
	var runs sync.WaitGroup
	for range 2 {
		s, err := periodic.New(q, periodic.Options{Observer: pc.Observer(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Add(periodic.Job{Name: "report", Schedule: periodic.Every(period)}); err != nil {
			t.Fatal(err)
		}
		runs.Go(func() { _ = s.Run(rctx) })
	}
	stop := func() { cancel(); runs.Wait() }
	t.Cleanup(stop)
	count := func(metric, reason string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != metric {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if reason == "" || l.GetName() == "reason" && l.GetValue() == reason {
						return m.GetCounter().GetValue()
					}
				}
			}
		}
		return -1
	}
	enq := func() float64 { return count("tierset_periodic_ticks_enqueued_total", "") }
	paused := func() float64 { return count("tierset_periodic_ticks_missed_total", "paused") }
	poll := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 20 s (enqueued %v, paused %v)", what, enq(), paused())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	poll("three ticks enqueued", func() bool { return enq() >= 3 })
	if err := periodic.Pause(ctx, q, "report"); err != nil {
		t.Fatal(err)
	}
	poll("three ticks paused", func() bool { return paused() >= 3 })
	if err := periodic.Resume(ctx, q, "report"); err != nil {
		t.Fatal(err)
	}
	atResume := enq()
	poll("two ticks enqueued after the resume", func() bool { return enq() >= atResume+2 })
	stop()

	jobs, err := periodic.List(ctx, q)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("List: %+v %v", jobs, err)
	}
	p, err := q.List(ctx, delay.ListOptions{Key: "report"})
	if err != nil {
		t.Fatal(err)
	}
	first := int64(0)
	for _, ti := range p.Tasks {
		ms, _ := strconv.ParseInt(ti.Token, 10, 64)
		if first == 0 || ms < first {
			first = ms
		}
	}
	ticks := (jobs[0].Last.UnixMilli()-first)/period.Milliseconds() + 1
	e, pa, cu := enq(), paused(), count("tierset_periodic_ticks_missed_total", "catchup")
	if int(e) != len(p.Tasks) || int64(e+pa+cu) != ticks {
		t.Errorf("enqueued %v (%d tasks), paused %v, catch-up %v; %d ticks from the first through the guard", e, len(p.Tasks), pa, cu, ticks)
	}
}
