package delaybench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/measure"
)

// delayAckCounter counts acks and records lateness as an Observer
// (observer), and signals when want acks were seen.
type delayAckCounter struct {
	Acked    atomic.Int64
	Lateness measure.Histogram
	want     atomic.Int64
	last     atomic.Int64 // Unix ns of the latest ack
	done     chan struct{}
	once     sync.Once
}

func newDelayAckCounter(want int) *delayAckCounter {
	c := &delayAckCounter{done: make(chan struct{})}
	c.want.Store(int64(want))
	return c
}

// setWant lowers the target to what was actually enqueued.
func (c *delayAckCounter) setWant(n int) {
	c.want.Store(int64(n))
	if c.Acked.Load() >= int64(n) {
		c.once.Do(func() { close(c.done) })
	}
}

// observer returns the Observer that feeds c.
func (c *delayAckCounter) observer() delay.Observer {
	return delay.Observer{OnAck: c.onAck, OnDelivered: func(_ string, l time.Duration) { c.Lateness.Record(l) }}
}

func (c *delayAckCounter) onAck(string) {
	c.Acked.Add(1)
	c.last.Store(time.Now().UnixNano())
	if c.Acked.Load() >= c.want.Load() {
		c.once.Do(func() { close(c.done) })
	}
}

// delayRunWorker runs a worker until the counter has seen every ack or
// timeout passes, with produce (if any) running meanwhile; it returns when
// Run has returned.
func delayRunWorker(ctx context.Context, q *delay.Queue, obs *delayAckCounter, concurrency, batch int, h delay.Handler,
	started chan<- time.Time, timeout time.Duration, produce func(context.Context) error) error {
	w, err := delay.NewPool(delay.PoolOptions{Concurrency: concurrency, ShutdownTimeout: 5 * time.Second})
	if err != nil {
		return fmt.Errorf("delay.NewPool: %w", err)
	}
	if err := w.Add(q, h, delay.QueueOptions{BatchSize: batch}); err != nil {
		return fmt.Errorf("delay.Pool.Add: %w", err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	runErr := make(chan error, 1)
	started <- time.Now()
	go func() { runErr <- w.Run(wctx) }()
	if produce != nil {
		if err := produce(ctx); err != nil {
			stop()
			<-runErr
			return err
		}
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-obs.done:
	case <-timer.C:
	case err := <-runErr:
		return fmt.Errorf("worker stopped early: %w", err)
	}
	stop()
	if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("worker: %w", err)
	}
	return nil
}

// takeAckRun is one worker run of the take+ack phase: floor judges its
// rate, cost prints what it cost the server.
type takeAckRun struct {
	concurrency, batch int
	floor, cost        bool
}

// takeAck pre-enqueues tasks due now and times one worker (concurrency 8,
// batch 100, no-op handler) from its start to the last ack. It repeats at
// batch 1000 (MaxBatch, the setting bench/peers compares), for
// information: a larger take spreads each script's fixed cost over more
// tasks, which the Redis CPU per 1,000 tasks shows. With Full it repeats
// at concurrency 100 too: it shows how much of the figure is the worker's
// concurrency rather than Redis.
func (b *delayBench) takeAck(ctx context.Context) error {
	runs := []takeAckRun{
		{concurrency: 8, batch: 100, floor: true, cost: true},
		{concurrency: 8, batch: delay.MaxBatch, cost: true},
	}
	if b.p.full {
		runs = append(runs, takeAckRun{concurrency: 100, batch: 100})
	}
	for i, r := range runs {
		if i > 0 {
			if err := deletePrefix(ctx, b.p.client, b.prefix); err != nil {
				return err
			}
		}
		if err := b.takeAckAt(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

func (b *delayBench) takeAckAt(ctx context.Context, r takeAckRun) error {
	concurrency, batch := r.concurrency, r.batch
	obs := newDelayAckCounter(b.sizes.takeAck)
	q, err := b.queue(fmt.Sprintf("takeack%d", concurrency), obs.observer())
	if err != nil {
		return err
	}
	n, err := enqueueAll(ctx, q, b.jobs(b.sizes.takeAck, 0, delay.After(0)), time.Now().Add(b.sizes.phaseBudget))
	if err != nil {
		return err
	}
	obs.setWant(n)
	var handled atomic.Int64
	started := make(chan time.Time, 1)
	cpu0, cpuOK, err := measure.ServerCPU(ctx, b.p.client)
	if err != nil {
		return err
	}
	err = delayRunWorker(ctx, q, obs, concurrency, batch, func(context.Context, *delay.Task) error {
		handled.Add(1)
		return nil
	}, started, b.sizes.phaseBudget, nil)
	if err != nil {
		return err
	}
	cpu1, cpu1OK, err := measure.ServerCPU(ctx, b.p.client)
	if err != nil {
		return err
	}
	start := <-started
	acked := obs.Acked.Load()
	if acked == 0 {
		return fmt.Errorf("take+ack: nothing acked within %v", b.sizes.phaseBudget)
	}
	rate := float64(acked) / time.Unix(0, obs.last.Load()).Sub(start).Seconds()
	if r.cost && cpuOK && cpu1OK {
		b.addServerCost(fmt.Sprintf("take+ack burst, batch %d", batch), cpu1-cpu0, acked, rate)
	}
	name := fmt.Sprintf("take+ack, 1 worker, concurrency %d, batch %d", concurrency, batch)
	note := fmt.Sprintf("%d tasks due now, no-op handler, worker start to last ack%s", acked, cut(int(acked), n))
	if !r.floor {
		b.add(delayRow{metric: name, value: rate, unit: "tasks/s", note: note})
		return nil
	}
	b.floors.JudgeIf(b.p.meaningful, measure.NotRedis, measure.Floor{Subject: "delay", Kind: measure.Tight, Name: name,
		Want: fmt.Sprintf("≥ %dk tasks/s", floorTakeAck/1000), Value: fmt.Sprintf("%.0f tasks/s", rate), Note: note}, rate >= floorTakeAck)
	return nil
}

// addServerCost prints what the burst cost the Redis server: CPU over the
// worker's whole run (INFO used_cpu_user + used_cpu_sys, so the worker's
// start and stop and any other client of a shared server count too) per
// 1,000 tasks, and the rate that cost would allow on one fully used Redis
// core, beside the rate reached.
func (b *delayBench) addServerCost(what string, cpu float64, acked int64, rate float64) {
	per1k := cpu / float64(acked) * 1000
	b.add(delayRow{metric: what + ": Redis CPU per 1,000 tasks", value: per1k * 1000, unit: "ms",
		note: fmt.Sprintf("%.4f CPU s per 1,000 (INFO used_cpu_user+used_cpu_sys over the worker's run, %d tasks)", per1k, acked)})
	allowed := 0.0
	if per1k > 0 {
		allowed = 1000 / per1k
	}
	b.add(delayRow{metric: what + ": rate one Redis core allows at that cost", value: allowed, unit: "tasks/s",
		note: fmt.Sprintf("1000 / CPU s per 1,000; reached %.0f tasks/s (%.0f%% of it)", rate, 100*rate/max(allowed, 1))})
}
