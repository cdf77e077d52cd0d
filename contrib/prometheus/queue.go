package prometheus

import (
	"context"
	"math"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierset/tierset/delay"
)

// QueueOptions configures a QueueCollector.
type QueueOptions struct {
	// Namespace prefixes every metric name. Default "tierset".
	Namespace string
	// Timeout bounds the Health reads of one scrape. Default 5 s.
	Timeout time.Duration
	// Behind is the wait of the oldest due task past which a served queue
	// reads "behind" in tierset_queue_health (Queue.Health's bound).
	// Defaults to 1 minute.
	Behind time.Duration
	// ConstLabels are added to every series. Default none.
	ConstLabels prometheus.Labels
}

// QueueCollector reads each queue's Health (its Stats and live workers)
// on every scrape. A queue whose read fails reports tierset_queue_up 0 and
// no other series for that scrape.
type QueueCollector struct {
	queues  []*delay.Queue
	timeout time.Duration
	behind  time.Duration

	up, tasks, oldest                                               *prometheus.Desc
	delivered, acked, retries, deadLettered, expired, cancel, broke *prometheus.Desc
	overflows, lost, restored, counterLost, indexLost               *prometheus.Desc
	lateness                                                        *prometheus.Desc
	paused, rate, highWater, highSpace                              *prometheus.Desc
	workers, health                                                 *prometheus.Desc
}

// verdicts are every delay.Verdict, in the order tierset_queue_health
// reports them.
var verdicts = []delay.Verdict{delay.VerdictIdle, delay.VerdictServed, delay.VerdictBehind, delay.VerdictNoWorker, delay.VerdictPaused}

var _ prometheus.Collector = (*QueueCollector)(nil)

// LatenessBounds are the upper bounds, in seconds, of the server-side
// lateness buckets (delay.LatenessBuckets): bucket 0 counts deliveries
// under 1 ms late, bucket b ≥ 1 those in [2^(b-1), 2^b) ms, so bucket b's
// bound is 2^b ms.
// Server buckets exclude their top edge, le includes it: a delivery exactly 2^b ms late counts under le=2^(b+1) ms.
func LatenessBounds() []float64 {
	var l delay.LatenessBuckets
	out := make([]float64, len(l.Counts))
	for b := range out {
		out[b] = math.Ldexp(1, b) / 1000
	}
	return out
}

// NewQueueCollector returns a collector of the given queues (for a
// delay.Sharded, pass its Shards()).
func NewQueueCollector(o QueueOptions, queues ...*delay.Queue) *QueueCollector {
	if o.Namespace == "" {
		o.Namespace = "tierset"
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Behind <= 0 {
		o.Behind = time.Minute
	}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(o.Namespace, "queue", name), help,
			append([]string{"queue"}, labels...), o.ConstLabels)
	}
	return &QueueCollector{
		queues:  append([]*delay.Queue(nil), queues...),
		timeout: o.Timeout,
		behind:  o.Behind,
		up:      d("up", "1 when this scrape read the queue's Health, 0 when the read failed."),
		workers: d("workers", "Live worker pools serving the queue (its registry entries not yet expired)."),
		health: d("health", "1 for the queue's current verdict (Queue.Health), 0 for the others: idle (nothing due), "+
			"served, behind (the oldest due task waited past the bound), no_worker (due tasks, no live worker), paused.", "verdict"),
		tasks: d("tasks", "Tasks by state; the states do not overlap, so their sum is every task kept: "+
			"scheduled (pending, not yet due), ready (pending and due), in_flight, dead, done (tombstones).", "state"),
		oldest:       d("oldest_due_age_seconds", "How long the earliest ready task has been due."),
		delivered:    d("delivered_total", "Deliveries since the queue's keys were created (every worker)."),
		acked:        d("acked_total", "Acks since the queue's keys were created."),
		retries:      d("retries_total", "Retries since the queue's keys were created."),
		deadLettered: d("dead_lettered_total", "Tasks dead-lettered since the queue's keys were created."),
		expired:      d("expired_total", "Leases that expired and were swept."),
		cancel:       d("cancelled_total", "Tasks cancelled."),
		broke:        d("corrupt_total", "Unreadable records the scripts met."),
		overflows:    d("seq_overflows_total", "Scores whose millisecond ran out of sequence numbers and moved to a later millisecond."),
		lost:         d("lost_total", "Task IDs due or in flight met without a record (Redis lost it), moved to the dead set."),
		restored:     d("restored_total", "Records in no set (their due entry lost) put back in due by an enqueue of their key and token."),
		counterLost:  d("id_repairs_total", "Repairs of a lost task ID counter."),
		indexLost:    d("index_lost_total", "Repairs of a lost key index."),
		paused:       d("paused", "1 while the queue is paused (Queue.Pause): no worker takes from it."),
		rate:         d("rate_limit_per_second", "The queue's rate limit in tasks a second (Queue.SetRate); 0 when none."),
		highWater:    d("high_water", "The most sequence numbers of one millisecond an enqueue met over the last one to two minutes."),
		highSpace:    d("high_water_space", "The sequence numbers one millisecond holds: high_water / high_water_space is how full the busiest millisecond came."),
		lateness: d("lateness_seconds", "Server-side lateness of every delivery (Redis TIME at take minus due time), "+
			"in the queue's own power-of-two millisecond buckets. The server keeps no sum: _sum counts each delivery "+
			"at its bucket's lower edge, a lower bound of the true sum."),
	}
}

// Describe implements prometheus.Collector.
func (c *QueueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.tasks, c.oldest, c.delivered, c.acked, c.retries,
		c.deadLettered, c.expired, c.cancel, c.broke, c.overflows, c.lost, c.restored, c.counterLost, c.indexLost,
		c.lateness, c.paused, c.rate, c.highWater, c.highSpace, c.workers, c.health} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *QueueCollector) Collect(ch chan<- prometheus.Metric) {
	// A scrape carries no context; the timeout bounds it instead.
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	bounds := LatenessBounds()
	for _, q := range c.queues {
		name := q.Name()
		h, err := q.Health(ctx, c.behind)
		if err != nil {
			ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0, name)
			continue
		}
		s := h.Stats
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1, name)
		ch <- prometheus.MustNewConstMetric(c.workers, prometheus.GaugeValue, float64(len(h.Workers)), name)
		for _, v := range verdicts {
			on := 0.0
			if v == h.Verdict {
				on = 1
			}
			ch <- prometheus.MustNewConstMetric(c.health, prometheus.GaugeValue, on, name, strings.ReplaceAll(string(v), " ", "_"))
		}
		for _, st := range []struct {
			state string
			n     int64
		}{{"scheduled", s.Pending - s.Ready}, {"ready", s.Ready}, {"in_flight", s.InFlight}, {"dead", s.Dead}, {"done", s.Done}} {
			ch <- prometheus.MustNewConstMetric(c.tasks, prometheus.GaugeValue, float64(st.n), name, st.state)
		}
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, s.OldestDueAge.Seconds(), name)
		paused := 0.0
		if s.Paused {
			paused = 1
		}
		ch <- prometheus.MustNewConstMetric(c.paused, prometheus.GaugeValue, paused, name)
		ch <- prometheus.MustNewConstMetric(c.rate, prometheus.GaugeValue, s.Rate.PerSecond, name)
		ch <- prometheus.MustNewConstMetric(c.highWater, prometheus.GaugeValue, float64(s.HighWater), name)
		ch <- prometheus.MustNewConstMetric(c.highSpace, prometheus.GaugeValue, float64(s.HighWaterSpace), name)
		for _, ct := range []struct {
			d *prometheus.Desc
			n int64
		}{{c.delivered, s.Delivered}, {c.acked, s.Acked}, {c.retries, s.Retries}, {c.deadLettered, s.DeadLettered},
			{c.expired, s.Expired}, {c.cancel, s.Cancelled}, {c.broke, s.Corrupt}, {c.overflows, s.SeqOverflows},
			{c.lost, s.Lost}, {c.restored, s.Restored}, {c.counterLost, s.CounterLost}, {c.indexLost, s.IndexLost}} {
			ch <- prometheus.MustNewConstMetric(ct.d, prometheus.CounterValue, float64(ct.n), name)
		}
		buckets := make(map[float64]uint64, len(bounds))
		var cum uint64
		var sum float64
		for b, n := range s.Lateness.Counts {
			cum += uint64(max(n, 0))
			buckets[bounds[b]] = cum
			if b > 0 {
				sum += float64(max(n, 0)) * bounds[b-1] // bucket b starts at 2^(b-1) ms
			}
		}
		ch <- prometheus.MustNewConstHistogram(c.lateness, cum, sum, buckets, name)
	}
}
