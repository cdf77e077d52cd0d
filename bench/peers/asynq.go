package main

import (
	"context"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// asynqPeer runs hibiken/asynq v0.26.0 on its own Redis DB, in a queue of
// its own, so that only its keys ("asynq:{<queue>}:*") are touched.
type asynqPeer struct {
	label    string
	rdb      *redis.Client
	queue    string
	forward  time.Duration // Config.DelayedTaskCheckInterval; 0 = asynq's default (5 s)
	check    time.Duration // Config.TaskCheckInterval; 0 = asynq's default (1 s)
	client   *asynq.Client
	server   *asynq.Server
	taskType string
	uuidIDs  bool // let asynq make its own 36-byte UUID task IDs
}

func newAsynqPeer(rdb *redis.Client, queue, label string, forward, check time.Duration, uuidIDs bool) *asynqPeer {
	return &asynqPeer{label: label, rdb: rdb, queue: queue, forward: forward, check: check, taskType: "bench:noop",
		uuidIDs: uuidIDs, client: asynq.NewClientFromRedisClient(rdb)}
}

func (p *asynqPeer) name() string       { return p.label }
func (p *asynqPeer) product() string    { return "asynq" }
func (p *asynqPeer) keyPattern() string { return "asynq:{" + p.queue + "}:*" }

func (p *asynqPeer) settings() string {
	fwd, check := "DelayedTaskCheckInterval 5s (default)", "TaskCheckInterval 1s (default)"
	if p.forward > 0 {
		fwd = fmt.Sprintf("DelayedTaskCheckInterval %v", p.forward)
	}
	if p.check > 0 {
		check = fmt.Sprintf("TaskCheckInterval %v", p.check)
	}
	ids := "TaskID = business key"
	if p.uuidIDs {
		ids = "asynq's UUID task IDs"
	}
	return fmt.Sprintf("1 server, Concurrency %d, %s, %s, MaxRetry 0, %s", handlers, fwd, check, ids)
}

// enqueueMany: asynq has no batch enqueue; concurrent calls are its fastest path.
func (p *asynqPeer) enqueueMany(ctx context.Context, ts []task) error {
	return enqueueConcurrently(ctx, ts, p.enqueue)
}

func (p *asynqPeer) footprint(ctx context.Context) (int64, string, error) {
	return usedMemory(ctx, p.rdb)
}

func (p *asynqPeer) reset(ctx context.Context) error {
	p.stop()
	_, err := deleteKeys(ctx, p.rdb, p.keyPattern())
	return err
}

func (p *asynqPeer) enqueue(ctx context.Context, t task) error {
	// TaskID = the 25-byte business key: asynq then stores the same key
	// bytes tierset does (its default UUID would be 36 bytes), and dedups on it.
	opts := []asynq.Option{asynq.Queue(p.queue), asynq.ProcessAt(t.due), asynq.MaxRetry(0)}
	if !p.uuidIDs {
		opts = append(opts, asynq.TaskID(t.key))
	}
	_, err := p.client.EnqueueContext(ctx, asynq.NewTask(p.taskType, t.payload), opts...)
	if err != nil {
		return fmt.Errorf("asynq enqueue: %w", err)
	}
	return nil
}

func (p *asynqPeer) start(_ context.Context, deliver func([]byte)) error {
	p.server = asynq.NewServerFromRedisClient(p.rdb, asynq.Config{
		Concurrency:              handlers,
		Queues:                   map[string]int{p.queue: 1},
		DelayedTaskCheckInterval: p.forward,
		TaskCheckInterval:        p.check,
		LogLevel:                 asynq.ErrorLevel,
		ShutdownTimeout:          2 * time.Second,
	})
	return p.server.Start(asynq.HandlerFunc(func(_ context.Context, t *asynq.Task) error {
		deliver(t.Payload())
		return nil
	}))
}

func (p *asynqPeer) stop() {
	if p.server != nil {
		p.server.Shutdown()
		p.server = nil
	}
}

// cleanup deletes this queue's keys and its entry in asynq's queue set; the
// server's own heartbeat keys are removed by Shutdown.
func (p *asynqPeer) cleanup(ctx context.Context) error {
	p.stop()
	if _, err := deleteKeys(ctx, p.rdb, p.keyPattern()); err != nil {
		return err
	}
	return p.rdb.SRem(ctx, "asynq:queues", p.queue).Err()
}
