package prometheus

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierset/tierset/delay"
)

// DelayOptions configures a DelayCollector.
type DelayOptions struct {
	// Namespace prefixes every metric name. Default "tierset".
	Namespace string
	// LatenessBuckets are lateness_seconds's bounds. Default 1 ms to
	// ~65 s, doubling.
	LatenessBuckets []float64
	// HandleBuckets are handle_seconds's bounds. Default 1 ms to ~65 s,
	// doubling.
	HandleBuckets []float64
	// ConstLabels are added to every series. Default none.
	ConstLabels prometheus.Labels
	// Queues are created at 0 from the start (every series of each), so
	// rate() and alerts see them before the first event. A queue not
	// listed gets all its series at its first event. Default none.
	Queues []string
}

// DelayCollector is a prometheus.Collector fed by a delay.Observer
// (Observer).
// It counts what this process's queues and workers did; QueueCollector
// reads the queue-wide counters from Redis.
type DelayCollector struct {
	enqueued, delivered, acked, retries, dead *prometheus.CounterVec
	swept, sweptDead, errors                  *prometheus.CounterVec
	losses, warnings                          *prometheus.CounterVec
	lateness, handle                          *prometheus.HistogramVec

	seen sync.Map // queue name -> struct{}: its series exist
}

var (
	_ prometheus.Collector = (*DelayCollector)(nil)
)

// NewDelayCollector returns a collector; register it and pass its
// Observer as delay.Options.Observer.
func NewDelayCollector(o DelayOptions) *DelayCollector {
	if o.Namespace == "" {
		o.Namespace = "tierset"
	}
	if o.LatenessBuckets == nil {
		o.LatenessBuckets = prometheus.ExponentialBuckets(0.001, 2, 17)
	}
	if o.HandleBuckets == nil {
		o.HandleBuckets = prometheus.ExponentialBuckets(0.001, 2, 17)
	}
	vec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: o.Namespace, Subsystem: "delay",
			Name: name, Help: help, ConstLabels: o.ConstLabels}, append([]string{"queue"}, labels...))
	}
	c := &DelayCollector{
		enqueued:  vec("enqueued_total", "Enqueue results seen by this process: new or duplicate.", "result"),
		delivered: vec("delivered_total", "Tasks this process took."),
		acked:     vec("acked_total", "Tasks this process acked."),
		retries:   vec("retries_total", "Tasks this process sent back to due."),
		dead:      vec("dead_total", "Tasks this process dead-lettered."),
		swept:     vec("sweep_returned_total", "Expired leases this process's sweeps returned to due."),
		sweptDead: vec("sweep_dead_total", "Tasks this process's sweeps dead-lettered."),
		errors:    vec("errors_total", "Failed queue operations, by operation.", "op"),
		losses: vec("losses_total", "State Redis lost that this process met, by kind: tasks for record_lost and due_lost, "+
			"one per repair for counter_lost and index_lost.", "kind"),
		warnings: vec("warnings_total", "Server or client settings that put the queue at risk, by kind.", "kind"),
		lateness: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: o.Namespace, Subsystem: "delay",
			Name: "lateness_seconds", Help: "Lateness of this process's deliveries (Redis TIME at take minus due time).",
			ConstLabels: o.ConstLabels, Buckets: o.LatenessBuckets}, []string{"queue"}),
		handle: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: o.Namespace, Subsystem: "delay",
			Name: "handle_seconds", Help: "Duration of this process's handler calls, by result (ok, error, skip_retry, panic, shutdown).",
			ConstLabels: o.ConstLabels, Buckets: o.HandleBuckets}, []string{"queue", "result"}),
	}
	for _, q := range o.Queues {
		c.ensure(q)
	}
	return c
}

// Label values created with each queue: every outcome, op, kind.
var (
	// The ops delay's workers report (Observer.OnError).
	delayOps      = []string{"check", "take", "handle", "ack", "retry", "kill", "release", "sweep", "wake", "heartbeat"}
	delayLosses   = []string{"record_lost", "due_lost", "counter_lost", "index_lost", "other"}
	delayResults  = []string{"ok", "error", "skip_retry", "panic", "shutdown"}
	delayWarnings = []string{"eviction_policy", "config_unavailable", "high_water", "other"}
)

// ensure creates queue's series at 0 once.
func (c *DelayCollector) ensure(queue string) {
	if _, ok := c.seen.Load(queue); ok {
		return
	}
	if _, loaded := c.seen.LoadOrStore(queue, struct{}{}); loaded {
		return
	}
	c.enqueued.WithLabelValues(queue, "new")
	c.enqueued.WithLabelValues(queue, "duplicate")
	for _, v := range []*prometheus.CounterVec{c.delivered, c.acked, c.retries, c.dead, c.swept, c.sweptDead} {
		v.WithLabelValues(queue)
	}
	for _, op := range delayOps {
		c.errors.WithLabelValues(queue, op)
	}
	for _, k := range delayLosses {
		c.losses.WithLabelValues(queue, k)
	}
	for _, k := range delayWarnings {
		c.warnings.WithLabelValues(queue, k)
	}
	c.lateness.WithLabelValues(queue)
	for _, r := range delayResults {
		c.handle.WithLabelValues(queue, r)
	}
}

// onEnqueue counts a new or duplicate enqueue.
func (c *DelayCollector) onEnqueue(queue string, duplicate bool) {
	c.ensure(queue)
	r := "new"
	if duplicate {
		r = "duplicate"
	}
	c.enqueued.WithLabelValues(queue, r).Inc()
}

// onDelivered counts a delivery and its lateness (an early one as 0).
func (c *DelayCollector) onDelivered(queue string, lateness time.Duration) {
	c.ensure(queue)
	c.delivered.WithLabelValues(queue).Inc()
	c.lateness.WithLabelValues(queue).Observe(max(lateness, 0).Seconds())
}

// onAck counts an ack.
func (c *DelayCollector) onAck(queue string) {
	c.ensure(queue)
	c.acked.WithLabelValues(queue).Inc()
}

// onRetry counts a retry.
func (c *DelayCollector) onRetry(queue string, _ int, _ time.Duration) {
	c.ensure(queue)
	c.retries.WithLabelValues(queue).Inc()
}

// onDead counts a dead-lettered task.
func (c *DelayCollector) onDead(queue string, _ int) {
	c.ensure(queue)
	c.dead.WithLabelValues(queue).Inc()
}

// onSweep counts what a sweep returned and dead-lettered.
func (c *DelayCollector) onSweep(queue string, returned, dead int) {
	c.ensure(queue)
	c.swept.WithLabelValues(queue).Add(float64(returned))
	c.sweptDead.WithLabelValues(queue).Add(float64(dead))
}

// onError counts a failed operation.
func (c *DelayCollector) onError(queue, op string, _ error) {
	c.ensure(queue)
	c.errors.WithLabelValues(queue, op).Inc()
}

// onLoss counts what Redis lost, by the sentinel err wraps.
func (c *DelayCollector) onLoss(queue string, err error, n int) {
	c.ensure(queue)
	c.losses.WithLabelValues(queue, lossKind(err)).Add(float64(n))
}

func lossKind(err error) string {
	switch {
	case errors.Is(err, delay.ErrRecordLost):
		return "record_lost"
	case errors.Is(err, delay.ErrDueLost):
		return "due_lost"
	case errors.Is(err, delay.ErrCounterLost):
		return "counter_lost"
	case errors.Is(err, delay.ErrIndexLost):
		return "index_lost"
	}
	return "other"
}

// onWarning counts a risky setting or state: eviction_policy,
// config_unavailable, high_water (a millisecond's score space nearly
// full), or other (a client without ContextTimeoutEnabled).
func (c *DelayCollector) onWarning(queue string, err error) {
	c.ensure(queue)
	kind := "other"
	switch {
	case errors.Is(err, delay.ErrEvictionPolicy):
		kind = "eviction_policy"
	case errors.Is(err, delay.ErrConfigUnavailable):
		kind = "config_unavailable"
	case errors.Is(err, delay.ErrHighWater):
		kind = "high_water"
	}
	c.warnings.WithLabelValues(queue, kind).Inc()
}

// onHandled observes a handler call's duration under its result.
func (c *DelayCollector) onHandled(queue string, took time.Duration, res delay.HandleResult) {
	c.handle.WithLabelValues(queue, string(res)).Observe(took.Seconds())
}

// Observer returns the delay.Observer that feeds c: pass it as
// delay.Options.Observer (of every queue, or a Sharded queue's Queue).
func (c *DelayCollector) Observer() delay.Observer {
	return delay.Observer{OnEnqueue: c.onEnqueue, OnDelivered: c.onDelivered, OnAck: c.onAck, OnRetry: c.onRetry,
		OnDead: c.onDead, OnSweep: c.onSweep, OnError: c.onError, OnLoss: c.onLoss, OnWarning: c.onWarning,
		OnHandled: c.onHandled}
}

func (c *DelayCollector) collectors() parts {
	return parts{c.enqueued, c.delivered, c.acked, c.retries, c.dead, c.swept, c.sweptDead, c.errors,
		c.losses, c.warnings, c.lateness, c.handle}
}

// Describe implements prometheus.Collector.
func (c *DelayCollector) Describe(ch chan<- *prometheus.Desc) { c.collectors().Describe(ch) }

// Collect implements prometheus.Collector.
func (c *DelayCollector) Collect(ch chan<- prometheus.Metric) { c.collectors().Collect(ch) }
