package e2e_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/keyname"
	"github.com/tierset/tierset/internal/testredis"
)

func foPromotion(id string) gradient.Promotion {
	p := gradient.Promotion{ID: id, Metric: gradient.Quantity, MinorDigits: 2}
	for _, n := range []int64{3, 5, 10} {
		p.Tiers = append(p.Tiers, gradient.Tier{
			ID: "t" + strconv.FormatInt(n, 10), Threshold: decimal.NewFromInt(n),
			Reward: gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(2 * n)},
		})
	}
	return p
}

// cartLog records every cart match: when it started and ended, and whether
// every line came back with the right tier.
type cartLog struct {
	mu   sync.Mutex
	runs []cartRun
}

type cartRun struct {
	start, end time.Time
	ok         bool
}

func (c *cartLog) add(start, end time.Time, ok bool) {
	c.mu.Lock()
	c.runs = append(c.runs, cartRun{start, end, ok})
	c.mu.Unlock()
}

// recoveredAfter returns the end of the first successful cart S after the
// kill such that every cart started after S started succeeded too (and at
// least 20 did, so a lone lucky success does not count); zero before that.
func (c *cartLog) recoveredAfter(kill time.Time) time.Time {
	c.mu.Lock()
	runs := append([]cartRun(nil), c.runs...)
	c.mu.Unlock()
	sort.Slice(runs, func(i, j int) bool { return runs[i].start.Before(runs[j].start) })
	lastFail := -1
	for i, r := range runs {
		if !r.ok && r.end.After(kill) {
			lastFail = i
		}
	}
	if lastFail < 0 || len(runs)-lastFail-1 < 20 {
		return time.Time{}
	}
	first := time.Time{}
	for _, r := range runs[lastFail+1:] {
		if first.IsZero() || r.end.Before(first) {
			first = r.end
		}
	}
	return first
}

func (c *cartLog) failuresAfter(t time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, r := range c.runs {
		if !r.ok && r.start.After(t) {
			n++
		}
	}
	return n
}

func (c *cartLog) stats(kill time.Time) (failed, ok int, lastFail time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.runs {
		if r.end.Before(kill) {
			continue
		}
		if r.ok {
			ok++
		} else {
			failed++
			lastFail = r.end.Sub(kill)
		}
	}
	return failed, ok, lastFail
}

// delivery is one handling of a task, with its lease as the server set it.
type delivery struct {
	id          string // the queue's task ID
	fence       int64
	deliveredAt time.Time // Redis TIME at take
	deadline    time.Time // lease end, Redis clock
	handledAt   time.Time // client clock
}

type deliveryLog struct {
	mu         sync.Mutex
	byKey      map[string][]delivery
	active     map[string]bool
	concurrent int
	n          int
}

func (d *deliveryLog) begin(t *delay.Task) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.active[t.Key] {
		d.concurrent++
	}
	d.active[t.Key] = true
	d.byKey[t.Key] = append(d.byKey[t.Key], delivery{t.ID, t.Fence, t.DeliveredAt, t.Deadline, time.Now()})
	d.n++
}

func (d *deliveryLog) end(key string) {
	d.mu.Lock()
	delete(d.active, key)
	d.mu.Unlock()
}

func (d *deliveryLog) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}

func (d *deliveryLog) missing(keys []string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, k := range keys {
		if len(d.byKey[k]) == 0 {
			n++
		}
	}
	return n
}

func (d *deliveryLog) missingSample(keys []string, max int) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, k := range keys {
		if len(d.byKey[k]) == 0 && len(out) < max {
			out = append(out, k)
		}
	}
	return out
}

// firstEnqueuedAfter returns when the first task whose enqueue started
// after kill was handled (zero if none yet).
func (d *deliveryLog) firstEnqueuedAfter(kill time.Time, p *producer) time.Time {
	p.mu.Lock()
	var keys []string
	for k, at := range p.firstTry {
		if at.After(kill) {
			keys = append(keys, k)
		}
	}
	p.mu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	var first time.Time
	for _, k := range keys {
		for _, dl := range d.byKey[k] {
			if first.IsZero() || dl.handledAt.Before(first) {
				first = dl.handledAt
			}
		}
	}
	return first
}

type deliveryReport struct {
	total, tasks, redelivered, afterLease, takeLost, reEnqueued, concurrent, leaseViolations int
	violationSample                                                                          []string
}

// report classifies every redelivery. After lease expiry (on the server's
// clock) is at-least-once and fine. Before expiry it is fine only when the
// earlier delivery was taken from the killed master just before the kill
// and the redelivery came from its successor: that take was acknowledged
// but never replicated, so the new master never knew of the lease. Any
// other early redelivery is a violation. A delivery of another task ID for
// the same key is not a redelivery of that task at all: the producer's
// retry of an enqueue whose WAIT was not confirmed arrived after the first
// task had been handled and acked (so deleted), and the queue rightly took
// it as a new task. It is counted apart.
//
// Deliveries are grouped by business key because the producer's key is
// what a lost task would be missed by.
func (d *deliveryLog) report(kill time.Time) deliveryReport {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := deliveryReport{tasks: len(d.byKey), concurrent: d.concurrent}
	for key, ds := range d.byKey {
		r.total += len(ds)
		sort.Slice(ds, func(i, j int) bool { return ds[i].deliveredAt.Before(ds[j].deliveredAt) })
		for i := 1; i < len(ds); i++ {
			r.redelivered++
			prev, cur := ds[i-1], ds[i]
			switch {
			case cur.id != prev.id:
				r.reEnqueued++
			case !cur.deliveredAt.Before(prev.deadline):
				r.afterLease++
			case prev.deliveredAt.Before(kill) && cur.deliveredAt.After(kill):
				r.takeLost++
			default:
				r.leaseViolations++
				if len(r.violationSample) < 5 {
					r.violationSample = append(r.violationSample, fmt.Sprintf("%s (task %s): fence %d lease until %s, fence %d at %s",
						key, cur.id, prev.fence, prev.deadline.Format("15:04:05.000"), cur.fence, cur.deliveredAt.Format("15:04:05.000")))
				}
			}
		}
	}
	return r
}

// producer enqueues one task every 10 ms on the master of the queue's
// slot, through a one-connection client so that WAIT 1 covers exactly the
// enqueue before it. A task counts as acknowledged only when WAIT says a
// replica has it (see enqueue). On any failure it re-resolves the master and retries the
// same (key, token), which the queue turns into a duplicate if the earlier
// attempt had landed.
type producer struct {
	cc      *redis.ClusterClient
	name    string
	opts    delay.Options
	retries atomic.Int64

	mu       sync.Mutex
	acked    map[string]time.Time // key -> when acknowledged
	firstTry map[string]time.Time
}

func (p *producer) run(ctx context.Context, t *testing.T) {
	p.mu.Lock()
	p.firstTry = map[string]time.Time{}
	p.mu.Unlock()
	var conn *redis.Client
	var q *delay.Queue
	var replicas int
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ctx.Err() == nil; i++ {
		key := "task-" + strconv.Itoa(i)
		p.mu.Lock()
		p.firstTry[key] = time.Now()
		p.mu.Unlock()
		for ctx.Err() == nil {
			if conn == nil {
				m, err := p.cc.MasterForKey(ctx, keyname.QueueTag(p.name))
				if err != nil {
					p.retries.Add(1)
					time.Sleep(100 * time.Millisecond)
					continue
				}
				conn = redis.NewClient(&redis.Options{Addr: m.Options().Addr, PoolSize: 1, MaxRetries: -1, ContextTimeoutEnabled: true,
					DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
				if q, err = delay.New(conn, p.name, p.opts); err != nil {
					t.Errorf("producer: delay.New: %v", err)
					return
				}
				info, err := conn.Info(ctx, "replication").Result()
				if err != nil {
					_ = conn.Close()
					conn = nil
					p.retries.Add(1)
					time.Sleep(100 * time.Millisecond)
					continue
				}
				replicas, _ = strconv.Atoi(testredis.InfoFields(info)["connected_slaves"])
			}
			if p.enqueue(ctx, conn, q, key, replicas) {
				break
			}
			p.retries.Add(1)
			_ = conn.Close()
			conn = nil
			time.Sleep(100 * time.Millisecond)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
}

// enqueue writes one task and, when the master has a replica, waits for
// it to confirm. A promoted replica has no replica of its own until the
// dead node is revived; the test kills nothing more, so there the
// master's own acknowledgement is as durable as this run needs.
func (p *producer) enqueue(ctx context.Context, conn *redis.Client, q *delay.Queue, key string, replicas int) bool {
	ectx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := q.Enqueue(ectx, delay.Job{Key: key, Token: key, Payload: []byte("x")}); err != nil {
		return false
	}
	if replicas > 0 {
		n, err := conn.Do(ectx, "WAIT", 1, 500).Int()
		if err != nil || n < 1 {
			return false
		}
	}
	p.mu.Lock()
	p.acked[key] = time.Now()
	p.mu.Unlock()
	return true
}

func (p *producer) ackedKeys() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.acked))
	for k := range p.acked {
		out = append(out, k)
	}
	return out
}

func (p *producer) ackedAfter(t time.Time) int {
	if t.IsZero() {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, at := range p.acked {
		if at.After(t) {
			n++
		}
	}
	return n
}
