package delay

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
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
	// while at least half of its lease is left; otherwise, and for every
	// buffered task at shutdown, it is released: put back in due at its
	// score with its attempt count restored. A task killed with its
	// process while buffered still counts one attempt and waits for its
	// lease. Default: BatchSize when BatchSize > Concurrency, else none
	// (each Take asks only for free handlers); negative: none.
	Prefetch int
	// ShutdownTimeout is how long Run waits for running handlers after its
	// context ends; their tasks are then left to their leases. Default 10 s.
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
	// WakeBlock is the BLPOP timeout. It only bounds how long shutdown waits
	// for the wake goroutine: due times are timed by a client-side timer,
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
}

// pausedPoll is the longest a worker waits before asking a paused queue
// again when no wake-up comes: Resume wakes one waiting worker through the
// wake list, the others within this.
const pausedPoll = time.Second

// Worker takes due tasks from one Queue and runs a Handler on them.
type Worker struct {
	q       *Queue
	h       Handler
	o       WorkerOptions
	running atomic.Bool
}

// NewWorker returns a worker for q running h.
func NewWorker(q *Queue, h Handler, opts WorkerOptions) (*Worker, error) {
	if q == nil || h == nil {
		return nil, fmt.Errorf("%w: nil queue or handler", ErrInvalidOptions)
	}
	o := opts
	def := func(v *time.Duration, d time.Duration) error {
		if *v < 0 {
			return fmt.Errorf("%w: negative duration %v", ErrInvalidOptions, *v)
		}
		if *v == 0 {
			*v = d
		}
		return nil
	}
	if o.Concurrency < 0 || o.BatchSize < 0 || o.BatchSize > MaxBatch || o.SweepBatch < 0 || o.SweepBatch > MaxBatch {
		return nil, fmt.Errorf("%w: concurrency %d batch %d sweep %d", ErrInvalidOptions, o.Concurrency, o.BatchSize, o.SweepBatch)
	}
	if o.Concurrency == 0 {
		o.Concurrency = 8
	}
	if o.BatchSize == 0 {
		o.BatchSize = min(o.Concurrency, MaxBatch)
	}
	if o.SweepBatch == 0 {
		o.SweepBatch = 100
	}
	switch {
	case o.Prefetch < 0:
		o.Prefetch = 0
	case o.Prefetch == 0 && o.BatchSize > o.Concurrency:
		o.Prefetch = o.BatchSize
	}
	o.Prefetch = min(o.Prefetch, MaxBatch)
	for _, e := range []error{
		def(&o.ShutdownTimeout, 10*time.Second), def(&o.WakeBlock, time.Second),
		def(&o.IdleCheck, 5*time.Second), def(&o.ReconnectMin, 50*time.Millisecond),
		def(&o.ReconnectMax, 2*time.Second),
	} {
		if e != nil {
			return nil, e
		}
	}
	o.WakeBlock = max(o.WakeBlock, time.Second)
	if o.WakeClient == nil {
		o.WakeClient = q.c
	}
	return &Worker{q: q, h: h, o: o}, nil
}

// Run takes and handles tasks until ctx ends, then stops taking, waits up to
// ShutdownTimeout for running handlers and returns ctx.Err() (joined with
// ErrShutdownTimeout if handlers were abandoned to their leases). Redis
// errors never stop it: it backs off (capped exponential) and resumes.
func (w *Worker) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: worker already running", ErrInvalidOptions)
	}
	defer w.running.Store(false)
	q := w.q
	// A server that may evict the queue's keys is refused before any take.
	if _, err := q.Check(ctx); err != nil {
		return err
	}
	// Handlers and their completions outlive ctx by up to ShutdownTimeout.
	hctx, hcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer hcancel()

	wake := make(chan struct{}, 1)
	var bg sync.WaitGroup
	bg.Add(1)
	go func() { defer bg.Done(); w.wakeLoop(ctx, wake) }()
	acks := make(chan Lease, 2*w.o.Concurrency+w.o.Prefetch+MaxBatch)
	quit := make(chan struct{})
	bg.Add(1)
	go func() { defer bg.Done(); w.ackLoop(hctx, acks, quit) }()

	// limit bounds the tasks this worker holds (running or buffered); the
	// take loop asks for more once refill of them are free, and ready
	// can hold them all, so a take never blocks on a busy handler.
	limit := w.o.Concurrency + w.o.Prefetch
	refill := 1
	if w.o.Prefetch > 0 {
		refill = max(1, min(w.o.BatchSize, limit)/2)
	}
	var held atomic.Int64
	freed := make(chan struct{}, 1)
	ready := make(chan *Task, limit)
	p := &pool{w: w, ctx: ctx, hctx: hctx, acks: acks, quit: quit}
	p.done = func() {
		if int64(limit)-held.Add(-1) >= int64(refill) {
			select {
			case freed <- struct{}{}:
			default:
			}
		}
	}
	var handlers sync.WaitGroup
	for range w.o.Concurrency {
		handlers.Add(1)
		go func() { defer handlers.Done(); p.serve(ready) }()
	}

	var nextExpiry time.Time
	failures := 0
	// takeReq is the take in progress: after a Redis error the next take
	// is the same call, so tasks a lost reply took come to this worker.
	takeReq := ""
loop:
	for ctx.Err() == nil {
		for int64(limit)-held.Load() < int64(refill) {
			select {
			case <-freed:
			case <-ctx.Done():
				break loop
			}
		}
		n := min(w.o.BatchSize, limit-int(held.Load()))
		if !nextExpiry.IsZero() && !q.ServerNow().Before(nextExpiry) {
			if _, err := q.Sweep(ctx, w.o.SweepBatch); err != nil {
				q.o.Observer.OnError(q.name, "sweep", err)
			}
		}
		if takeReq == "" {
			takeReq = q.req.next()
		}
		b, err := q.take(ctx, n, takeReq)
		if errors.Is(err, ErrRedis) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrRecordLost) {
			if ctx.Err() != nil {
				break
			}
			q.o.Observer.OnError(q.name, "take", err)
			failures++
			sleepCtx(ctx, w.reconnectDelay(failures))
			continue
		}
		takeReq = ""
		// ErrCorrupt and ErrRecordLost come with a batch of good tasks
		if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrRecordLost) {
			if ctx.Err() != nil {
				break
			}
			q.o.Observer.OnError(q.name, "take", err)
			failures++
			sleepCtx(ctx, w.reconnectDelay(failures))
			continue
		}
		if err != nil {
			q.o.Observer.OnError(q.name, "take", err)
		}
		failures = 0
		held.Add(int64(len(b.Tasks)))
		for _, t := range b.Tasks {
			ready <- t
		}
		nextExpiry = b.NextExpiry
		if len(b.Tasks) == n && b.NextToken.IsZero() {
			continue // there may be more due right now
		}
		wait := w.o.IdleCheck
		now := q.ServerNow()
		// A paused queue's due tasks wait for Resume, which pushes the wake
		// list; the poll is a safety net for a wake-up another worker took.
		// Under a rate limit a due task waits for its token.
		next := b.NextDue
		if b.Paused {
			next, wait = time.Time{}, min(wait, pausedPoll)
		} else if b.NextToken.After(next) {
			next = b.NextToken
		}
		if !next.IsZero() {
			wait = min(wait, next.Sub(now))
		}
		if !b.NextExpiry.IsZero() {
			wait = min(wait, b.NextExpiry.Sub(now)+time.Millisecond)
		}
		if wait <= 0 {
			// The estimate says due but the server did not: re-measure soon.
			wait = 200 * time.Microsecond
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-wake:
		case <-ctx.Done():
		}
		timer.Stop()
	}

	// Stop taking; what is still buffered goes straight back to due.
	close(ready)
	var unstarted []*Task
	for t := range ready {
		unstarted = append(unstarted, t)
	}
	w.releaseAll(hctx, unstarted)

	var err error = ctx.Err()
	done := make(chan struct{})
	go func() { handlers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(w.o.ShutdownTimeout):
		err = errors.Join(err, ErrShutdownTimeout)
		hcancel()
	}
	// Tasks a handler goroutine picked up as ctx ended (the rest, if
	// abandoned at the timeout, are left to their leases).
	w.releaseAll(hctx, p.takeUnstarted())
	close(quit)
	bg.Wait()
	hcancel()
	return err
}

// pool is the worker's handler goroutines' shared state.
type pool struct {
	w         *Worker
	ctx, hctx context.Context // Run's ctx (stop starting), handlers' ctx
	acks      chan<- Lease
	quit      <-chan struct{}
	done      func() // a held task left the worker's hands

	mu        sync.Mutex
	unstarted []*Task
}

// serve runs one handler slot: it starts buffered tasks one at a time, but
// none after Run's ctx ended and none whose lease is too close to its end
// (those are released).
func (p *pool) serve(ready <-chan *Task) {
	q := p.w.q
	margin := q.o.Lease / 2
	var late []*Task
	flushLate := func() {
		if len(late) > 0 {
			p.w.releaseAll(p.hctx, late)
			late = late[:0]
		}
	}
	for t := range ready {
		if p.ctx.Err() != nil {
			p.mu.Lock()
			p.unstarted = append(p.unstarted, t)
			p.mu.Unlock()
			p.done()
			continue
		}
		if t.Deadline.Sub(q.ServerNow()) < margin {
			late = append(late, t)
			p.done()
			if len(ready) > 0 && len(late) < MaxBatch {
				continue // gather the others that waited as long
			}
			flushLate()
			continue
		}
		flushLate()
		p.w.handle(p.hctx, t, p.acks, p.quit)
		p.done()
	}
	flushLate()
}

func (p *pool) takeUnstarted() []*Task {
	p.mu.Lock()
	defer p.mu.Unlock()
	u := p.unstarted
	p.unstarted = nil
	return u
}

// releaseAll gives unstarted tasks back; a failure leaves them to their
// leases, which is where they would be without the release.
func (w *Worker) releaseAll(ctx context.Context, tasks []*Task) {
	if len(tasks) == 0 {
		return
	}
	q := w.q
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	errs, err := q.release(rctx, tasks)
	if err != nil {
		q.o.Observer.OnError(q.name, "release", err)
		return
	}
	for _, e := range errs {
		if e != nil {
			q.o.Observer.OnError(q.name, "release", e)
		}
	}
}

func (w *Worker) reconnectDelay(failures int) time.Duration {
	d := w.o.ReconnectMin
	for i := 1; i < failures && d < w.o.ReconnectMax; i++ {
		d *= 2
	}
	d = min(d, w.o.ReconnectMax)
	return d/2 + rand.N(d/2+1)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// wakeLoop blocks on the wake list on its own connection; a pop means a
// task became the new head, so the main loop re-takes and re-arms its timer.
func (w *Worker) wakeLoop(ctx context.Context, wake chan<- struct{}) {
	failures := 0
	for ctx.Err() == nil {
		_, err := w.o.WakeClient.BLPop(ctx, w.o.WakeBlock, w.q.k.wake).Result()
		switch {
		case err == nil:
			failures = 0
			select {
			case wake <- struct{}{}:
			default:
			}
		case errors.Is(err, redis.Nil):
			failures = 0
		case ctx.Err() != nil || errors.Is(err, redis.ErrClosed):
			return
		default:
			failures++
			w.q.o.Observer.OnError(w.q.name, "wake", err)
			sleepCtx(ctx, w.reconnectDelay(failures))
		}
	}
}

func (w *Worker) handle(ctx context.Context, t *Task, acks chan<- Lease, quit <-chan struct{}) {
	q := w.q
	var stop func() error
	if w.o.AutoExtend {
		stop = q.KeepAlive(ctx, t, 0)
	}
	err := w.call(ctx, t)
	if stop != nil {
		_ = stop()
	}
	if err != nil && ctx.Err() != nil {
		// Abandoned at ShutdownTimeout: the lease brings the task back.
		q.o.Observer.OnError(q.name, "handle", err)
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err == nil {
		select {
		case acks <- t.Lease:
		case <-quit: // abandoned at shutdown timeout: ack directly
			if aerr := q.Ack(cctx, t.Lease); aerr != nil {
				q.o.Observer.OnError(q.name, "ack", aerr)
			}
		}
		return
	}
	if errors.Is(err, ErrSkipRetry) {
		if _, kerr := q.Kill(cctx, t.Lease, err); kerr != nil {
			q.o.Observer.OnError(q.name, "kill", kerr)
		}
		return
	}
	if _, rerr := q.Retry(cctx, t, err); rerr != nil {
		q.o.Observer.OnError(q.name, "retry", rerr)
	}
}

func (w *Worker) call(ctx context.Context, t *Task) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrPanic, r)
		}
	}()
	return w.h(ctx, t)
}
