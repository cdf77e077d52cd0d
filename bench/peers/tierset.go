package main

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/delay"
)

// tiersetPeer runs tierset's delay queue under a unique key prefix.
type tiersetPeer struct {
	rdb    *redis.Client
	prefix string
	queue  *delay.Queue
	cancel context.CancelFunc
	done   chan error
}

func newTiersetPeer(rdb *redis.Client, queue, prefix string) (*tiersetPeer, error) {
	q, err := delay.New(rdb, queue, delay.Options{Prefix: prefix})
	if err != nil {
		return nil, fmt.Errorf("delay.New: %w", err)
	}
	return &tiersetPeer{rdb: rdb, prefix: prefix, queue: q}, nil
}

func (p *tiersetPeer) name() string         { return "tierset" }
func (p *tiersetPeer) redis() *redis.Client { return p.rdb }
func (p *tiersetPeer) keyPattern() string   { return p.prefix + ":*" }

func (p *tiersetPeer) enqueue(ctx context.Context, t task) error {
	_, err := p.queue.Enqueue(ctx, delay.Job{Key: t.key, Payload: t.payload, When: delay.At(t.due)})
	return err
}

func (p *tiersetPeer) start(ctx context.Context, deliver func([]byte)) error {
	w, err := delay.NewWorker(p.queue, func(_ context.Context, t *delay.Task) error {
		deliver(t.Payload)
		return nil
	}, delay.WorkerOptions{Concurrency: 8, BatchSize: 100, ShutdownTimeout: 2 * time.Second})
	if err != nil {
		return fmt.Errorf("delay.NewWorker: %w", err)
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

func (p *tiersetPeer) cleanup(ctx context.Context) error {
	p.stop()
	_, err := deleteKeys(ctx, p.rdb, p.keyPattern())
	return err
}
