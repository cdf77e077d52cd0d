package prometheus

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierset/tierset/periodic"
)

// PeriodicOptions configures a PeriodicCollector.
type PeriodicOptions struct {
	// Namespace prefixes every metric name. Default "tierset".
	Namespace string
	// ConstLabels are added to every series. Default none.
	ConstLabels prometheus.Labels
	// Jobs are created at 0 from the start (each series of each), so
	// rate() and alerts see them before the first tick. A job not listed
	// gets its series at its first tick. Default none.
	Jobs []PeriodicJob
}

// PeriodicJob names a periodic job: its queue and its name.
type PeriodicJob struct{ Queue, Name string }

// PeriodicCollector is a prometheus.Collector fed by a periodic.Observer
// (Observer). Each tick is reported by the one process whose call
// handled it, so the sum over every process's series is the job's count.
type PeriodicCollector struct {
	enqueued, missed *prometheus.CounterVec

	seen sync.Map // PeriodicJob -> struct{}: its series exist
}

var _ prometheus.Collector = (*PeriodicCollector)(nil)

// periodicReasons are the missed ticks' reasons, created with each job.
var periodicReasons = []string{"catchup", "paused"}

// NewPeriodicCollector returns a collector; register it and pass its
// Observer as periodic.Options.Observer.
func NewPeriodicCollector(o PeriodicOptions) *PeriodicCollector {
	if o.Namespace == "" {
		o.Namespace = "tierset"
	}
	vec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: o.Namespace, Subsystem: "periodic",
			Name: name, Help: help, ConstLabels: o.ConstLabels}, append([]string{"queue", "job"}, labels...))
	}
	c := &PeriodicCollector{
		enqueued: vec("ticks_enqueued_total", "Ticks of a periodic job that made their task, handled by this process."),
		missed: vec("ticks_missed_total", "Ticks of a periodic job that passed without a task, handled by this process, "+
			"by reason: catchup (dropped by the job's catch-up policy) or paused.", "reason"),
	}
	for _, j := range o.Jobs {
		c.ensure(j.Queue, j.Name)
	}
	return c
}

// ensure creates a job's series at 0 once.
func (c *PeriodicCollector) ensure(queue, job string) {
	k := PeriodicJob{queue, job}
	if _, ok := c.seen.Load(k); ok {
		return
	}
	if _, loaded := c.seen.LoadOrStore(k, struct{}{}); loaded {
		return
	}
	c.enqueued.WithLabelValues(queue, job)
	for _, r := range periodicReasons {
		c.missed.WithLabelValues(queue, job, r)
	}
}

func (c *PeriodicCollector) onEnqueued(queue, job string) {
	c.ensure(queue, job)
	c.enqueued.WithLabelValues(queue, job).Inc()
}

func (c *PeriodicCollector) onMissed(queue, job, reason string, n int) {
	c.ensure(queue, job)
	c.missed.WithLabelValues(queue, job, reason).Add(float64(n))
}

// Observer returns the periodic.Observer that feeds c: pass it as
// periodic.Options.Observer of every Scheduler of the process.
func (c *PeriodicCollector) Observer() periodic.Observer {
	return periodic.Observer{OnEnqueued: c.onEnqueued, OnMissed: c.onMissed}
}

func (c *PeriodicCollector) collectors() parts { return parts{c.enqueued, c.missed} }

// Describe implements prometheus.Collector.
func (c *PeriodicCollector) Describe(ch chan<- *prometheus.Desc) { c.collectors().Describe(ch) }

// Collect implements prometheus.Collector.
func (c *PeriodicCollector) Collect(ch chan<- prometheus.Metric) { c.collectors().Collect(ch) }
