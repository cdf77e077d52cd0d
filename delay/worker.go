package delay

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Handler processes one task. Returning nil acks it; an error wrapping
// ErrSkipRetry (see Permanent) dead-letters it; any other error, or a
// panic, retries it with Options.Backoff. ctx ends when the worker's
// ShutdownTimeout runs out; the lease deadline is in t.Deadline.
type Handler func(ctx context.Context, t *Task) error

// WorkerOptions configure a Worker. The zero value of every field is its default.
type WorkerOptions struct {
	// Concurrency is the number of handlers running at once. Default 8.
	Concurrency int
	// BatchSize caps one Take (1..MaxBatch); see Prefetch for how full a
	// Take is. Default Concurrency.
	BatchSize int
	// Prefetch is how many taken tasks may wait in the worker for a free
	// handler, beyond the Concurrency running ones. With a buffer, a Take
	// carries up to BatchSize tasks whatever the number of free handlers,
	// and the next Take goes out when the buffer runs low (half empty), so
	// the network overlaps the handling. A buffered task is started only
	// while at least half of its lease is left; otherwise, for every
	// buffered task at shutdown, and once the queue is paused
	// (Queue.Pause, seen within 25 ms plus a round trip), it is released:
	// put back in due at its score with its attempt count restored. A task killed with its
	// process while buffered still counts one attempt and waits for its
	// lease. Default: BatchSize when BatchSize > Concurrency, else none
	// (each Take asks only for free handlers); negative: none.
	Prefetch int
	// ShutdownTimeout is how long Run waits for running handlers after its
	// context ends; see PoolOptions.ShutdownTimeout for what happens to a
	// handler still running then. Default 10 s.
	ShutdownTimeout time.Duration
	// SweepBatch caps one sweep of expired leases (1..MaxBatch). Default 100.
	SweepBatch int
	// AutoExtend extends each running task's lease every Lease/3 (see
	// Queue.KeepAlive). Default off: a handler must finish within the lease.
	AutoExtend bool
	// WakeClient carries the blocking BLPOP on the wake list, which holds a
	// connection for up to WakeBlock. Default: the queue's client (whose pool
	// must then have a spare connection; go-redis defaults to 10 per CPU).
	WakeClient redis.UniversalClient
	// WakeBlock is the BLPOP timeout (Run waits for a blocked BLPOP only
	// within ShutdownTimeout): due times are timed by a client-side timer,
	// because Redis checks blocking timeouts only every 1/hz (100 ms).
	// Default and minimum 1 s (the protocol counts BLPOP timeouts in seconds
	// on go-redis).
	WakeBlock time.Duration
	// IdleCheck is the longest sleep when no task is scheduled and no wake-up
	// arrives: a safety net for a wake-up consumed by another worker while
	// this one was busy. It never times a due task. Default 5 s.
	IdleCheck time.Duration
	// ReconnectMin and ReconnectMax bound the capped exponential backoff
	// after a Redis error. Defaults 50 ms and 2 s.
	ReconnectMin, ReconnectMax time.Duration
	// Heartbeat is how often the running worker refreshes its entry in
	// the worker registry (see ListWorkers). Default 5 s; negative: none;
	// below MinHeartbeat ErrInvalid (see PoolOptions.Heartbeat).
	Heartbeat time.Duration
}

// Worker takes due tasks from one Queue and runs a Handler on them. It is
// a Pool of one line.
type Worker struct {
	q *Queue
	p *Pool
}

// NewWorker returns a worker for q running h.
func NewWorker(q *Queue, h Handler, opts WorkerOptions) (*Worker, error) {
	if q == nil || h == nil {
		return nil, invalid("options", "nil queue or handler")
	}
	p, err := newWorkerPool(q, h, opts, 1)
	if err != nil {
		return nil, err
	}
	return &Worker{q: q, p: p}, nil
}

// newWorkerPool is the pool behind a Worker (shards = 1) or a
// ShardedWorker: one line, opts.Concurrency handlers per queue.
func newWorkerPool(l Line, h Handler, opts WorkerOptions, shards int) (*Pool, error) {
	o := opts
	if o.Concurrency < 0 || o.BatchSize < 0 || o.BatchSize > MaxBatch || o.SweepBatch < 0 || o.SweepBatch > MaxBatch {
		return nil, invalid("options", "concurrency %d batch %d sweep %d", o.Concurrency, o.BatchSize, o.SweepBatch)
	}
	if o.Concurrency == 0 {
		o.Concurrency = 8
	}
	p, err := NewPool(PoolOptions{
		Concurrency: o.Concurrency * shards, ShutdownTimeout: o.ShutdownTimeout,
		SweepBatch: o.SweepBatch, AutoExtend: o.AutoExtend, WakeClient: o.WakeClient,
		WakeBlock: o.WakeBlock, IdleCheck: o.IdleCheck, ReconnectMin: o.ReconnectMin,
		ReconnectMax: o.ReconnectMax, Heartbeat: o.Heartbeat,
	})
	if err != nil {
		return nil, err
	}
	p.perTaker = o.Concurrency
	if err := p.Add(l, h, QueueOptions{BatchSize: o.BatchSize, Prefetch: o.Prefetch}); err != nil {
		return nil, err
	}
	return p, nil
}

// Run takes and handles tasks until ctx ends, then stops taking, releases
// the taken tasks no handler started, waits up to ShutdownTimeout (from
// ctx's end) for running handlers and returns ctx.Err() (joined with
// ErrShutdownTimeout if handlers were still running). Redis errors never
// stop it, at start-up or later: it reports them (Observer.OnError,
// Stats().Errors), backs off (capped exponential) and resumes. It returns
// early only on a configuration error no retry fixes (ErrEvictionPolicy,
// see Queue.Check; NOAUTH, WRONGPASS or NOPERM from Redis before its first
// take or wake-up: a later refusal is retried and logged) or when already
// running. See Pool.Run.
func (w *Worker) Run(ctx context.Context) error { return w.p.Run(ctx) }

// Stats returns the worker's figures (see Pool.Stats).
func (w *Worker) Stats() LineStats { return w.p.Stats()[0] }

// ID returns the worker's registry ID (see ListWorkers).
func (w *Worker) ID() string { return w.p.ID() }
