package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/delay"
)

// tiersetPeer runs tierset's delay queue under a unique key prefix, on a
// new queue name for each workload.
type tiersetPeer struct {
	rdb    *redis.Client
	prefix string
	base   string
	batch  int
	phases int
	queue  *delay.Queue
	cancel context.CancelFunc
	done   chan error
}

func newTiersetPeer(rdb *redis.Client, queue, prefix string, batch int) (*tiersetPeer, error) {
	p := &tiersetPeer{rdb: rdb, prefix: prefix, base: queue, batch: batch}
	return p, p.open()
}

// open starts a fresh queue: deleting a live queue's keys under it would
// be a loss it reports, not an empty queue.
func (p *tiersetPeer) open() error {
	p.phases++
	q, err := delay.New(p.rdb, fmt.Sprintf("%s-%d", p.base, p.phases), delay.Options{Prefix: p.prefix})
	if err != nil {
		return fmt.Errorf("delay.New: %w", err)
	}
	p.queue = q
	return nil
}

func (p *tiersetPeer) name() string    { return "tierset" }
func (p *tiersetPeer) product() string { return "tierset" }
func (p *tiersetPeer) settings() string {
	s := fmt.Sprintf("1 worker, concurrency %d, BatchSize %d", handlers, p.batch)
	if p.batch > handlers {
		// WorkerOptions.Prefetch defaults to BatchSize above Concurrency.
		s += fmt.Sprintf(" (so Prefetch %d: a take brings up to %d tasks whatever the free handlers)", p.batch, p.batch)
	}
	return s + " (defaults otherwise)"
}

func (p *tiersetPeer) enqueue(ctx context.Context, t task) error {
	_, err := p.queue.Enqueue(ctx, delay.Job{Key: t.key, Payload: t.payload, When: delay.At(t.due)})
	return err
}

func (p *tiersetPeer) enqueueMany(ctx context.Context, ts []task) error {
	for len(ts) > 0 {
		jobs := make([]delay.Job, min(len(ts), delay.MaxBatch))
		for i := range jobs {
			jobs[i] = delay.Job{Key: ts[i].key, Payload: ts[i].payload, When: delay.At(ts[i].due)}
		}
		res, err := p.queue.EnqueueBatch(ctx, jobs)
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Err != nil {
				return r.Err
			}
		}
		ts = ts[len(jobs):]
	}
	return nil
}

func (p *tiersetPeer) start(ctx context.Context, deliver func([]byte)) error {
	w, err := delay.NewPool(delay.PoolOptions{Concurrency: handlers, ShutdownTimeout: 2 * time.Second})
	if err != nil {
		return fmt.Errorf("delay.NewPool: %w", err)
	}
	err = w.Add(p.queue, func(_ context.Context, t *delay.Task) error {
		deliver(t.Payload)
		return nil
	}, delay.QueueOptions{BatchSize: p.batch})
	if err != nil {
		return fmt.Errorf("delay.Pool.Add: %w", err)
	}
	ctx, p.cancel = context.WithCancel(ctx)
	p.done = make(chan error, 1)
	go func() { p.done <- w.Run(ctx) }()
	return nil
}

func (p *tiersetPeer) stop() {
	if p.cancel == nil {
		return
	}
	p.cancel()
	<-p.done
	p.cancel = nil
}

func (p *tiersetPeer) footprint(ctx context.Context) (int64, string, error) {
	return usedMemory(ctx, p.rdb)
}

func (p *tiersetPeer) reset(ctx context.Context) error {
	p.stop()
	_, err := deleteKeys(ctx, p.rdb, p.prefix+":*")
	return errors.Join(err, p.open())
}

func (p *tiersetPeer) cleanup(ctx context.Context) error {
	p.stop()
	_, err := deleteKeys(ctx, p.rdb, p.prefix+":*")
	return err
}
