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

// pausedPoll is the longest a taker waits before asking a paused queue
// again when no wake-up comes: Resume wakes one waiting worker through the
// wake list, the others within this.
const pausedPoll = time.Second

// taker takes one queue's due tasks for a Pool: its own timer, wake-up,
// sweep, ack batching and backoff, so a queue whose server is down or
// slow holds back no other queue.
type taker struct {
	q      *Queue
	l      *line
	p      *Pool
	s      *sched
	limit  int // tasks held (buffered or running) at most
	refill int // free places that trigger the next take
	maybe  bool

	// Guarded by sched.mu: the taker's tasks in its line's buffer, and
	// its take in flight as Weighted's round sees it (sched.fetchStart).
	buffered   int
	fetching   bool
	lastFull   bool // the last take brought all it asked for
	slow       bool // the last full take took longer than pendingWait
	fetchAt    time.Time
	fetchGen   uint64
	fetchTimer *time.Timer
	// pushed signals the pause watcher that tasks entered the buffer;
	// okAt is when the last take or check that found the queue not
	// paused went out (Unix ns).
	pushed chan struct{}
	okAt   atomic.Int64

	held atomic.Int64
	// dueBy is when the taker next has a task due, local Unix ms: now
	// after a take that brought tasks, the next due task's time after a
	// short one, 0 when nothing is known due (paused, empty, failing).
	// Other lines' takers read it to size their scripts (scriptCap).
	dueBy atomic.Int64
	freed chan struct{}
	wake  chan struct{}
	acks  chan leaseRef
	// ackMu orders sends on acks against closeAcks: a handler that returns
	// after the ack loop stopped acks directly instead.
	ackMu     sync.RWMutex
	ackClosed bool
	quit      chan struct{}
	// hist holds the handled tasks' counts until the ack loop writes them
	// to the queue's history (at most once per historyFlush).
	hist histAgg
}

func (tk *taker) reset(s *sched) {
	tk.s = s
	tk.maybe = false
	tk.buffered, tk.fetching, tk.lastFull, tk.slow = 0, false, true, false
	tk.pushed = make(chan struct{}, 1)
	tk.okAt.Store(0)
	tk.held.Store(0)
	tk.dueBy.Store(0)
	tk.freed = make(chan struct{}, 1)
	tk.wake = make(chan struct{}, 1)
	// Every held task sends at most one ack, and a send happens before
	// its task is given back, so the channel never holds more than limit
	// plus what the ack loop gathered meanwhile.
	tk.acks = make(chan leaseRef, 2*tk.limit+MaxBatch)
	tk.ackClosed = false
	tk.quit = make(chan struct{})
}

// done: a held task left the taker's hands.
func (tk *taker) done() {
	if int64(tk.limit)-tk.held.Add(-1) >= int64(tk.refill) {
		select {
		case tk.freed <- struct{}{}:
		default:
		}
	}
}

func (tk *taker) onError(op string, err error) {
	tk.l.errs.Add(1)
	tk.q.o.obs.OnError(tk.q.name, op, err)
}

func (tk *taker) reconnectDelay(failures int) time.Duration {
	return backoffDelay(tk.p.o.ReconnectMin, tk.p.o.ReconnectMax, failures)
}

func backoffDelay(lo, hi time.Duration, failures int) time.Duration {
	d := lo
	for i := 1; i < failures && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	return d/2 + rand.N(d/2+1)
}

// sharedHorizon is how soon another line's next due task must be for a
// line's scripts to be capped at SharedBatch.
const sharedHorizon = time.Second

// scriptCap returns how many of n tasks one take or ack script may carry:
// SharedBatch while another line of the pool has a task due within
// sharedHorizon, so that line's take does not wait behind a long script.
func (tk *taker) scriptCap(n int) int {
	c := tk.p.o.SharedBatch
	if c == 0 || n <= c {
		return n
	}
	by := time.Now().Add(sharedHorizon).UnixMilli()
	for _, l := range tk.s.lines {
		if l == tk.l {
			continue
		}
		for _, o := range l.takers {
			if d := o.dueBy.Load(); d != 0 && d <= by {
				return c
			}
		}
	}
	return n
}

// start runs the queue's start-up Check until it passes: a transport
// error is reported and retried with backoff; a configuration error
// (ErrEvictionPolicy, or Redis refusing the login or the command: NOAUTH,
// WRONGPASS, NOPERM) ends the pool's Run, named. It returns false when
// ctx ended first.
func (tk *taker) start(ctx context.Context, fail context.CancelCauseFunc) bool {
	for failures := 1; ctx.Err() == nil; failures++ {
		_, err := tk.q.Check(ctx)
		if err == nil {
			tk.l.up.Add(1)
			return true
		}
		if ended(ctx) {
			return false
		}
		if errors.Is(err, ErrEvictionPolicy) || refused(err) {
			tk.onError("check", err)
			fail(errFatal{fmt.Errorf("delay: queue %s: %w", tk.q.name, err)})
			return false
		}
		// A queue that cannot start has nothing due as far as Strict
		// is concerned: it must not hold the lines below it back.
		tk.s.setMaybe(tk, false)
		tk.onError("check", err)
		sleepCtx(ctx, tk.reconnectDelay(failures))
	}
	return false
}

// run is the take loop of one queue. Its wake goroutine is counted in
// wakes, which Run waits for apart: a BLPOP outlives a cancel.
func (tk *taker) run(ctx context.Context, fail context.CancelCauseFunc, wakes *sync.WaitGroup) {
	defer tk.s.setMaybe(tk, false)
	defer tk.dueBy.Store(0)
	defer tk.s.took(tk, nil, false)
	// Run drains the buffers once the takers stop, or at ShutdownTimeout:
	// what a late taker buffered after that, it releases itself.
	defer func() {
		ts := tk.s.unbuffer(tk)
		for range ts {
			tk.done()
		}
		tk.releaseAll(ctx, ts)
	}()
	if !tk.start(ctx, fail) {
		return
	}
	wakes.Add(1)
	go func() { defer wakes.Done(); tk.wakeLoop(ctx, fail) }()
	var bg sync.WaitGroup
	defer bg.Wait()
	bg.Add(1)
	go func() { defer bg.Done(); tk.watchPause(ctx) }()

	q, o, lo := tk.q, tk.p.o, tk.l.o
	var nextExpiry time.Time
	failures := 0
	// takeReq is the take in progress: after a Redis error the next take
	// is the same call, so tasks a lost reply took come to this worker.
	takeReq := ""
	taken := false // a take of this Run succeeded
	for ctx.Err() == nil {
		for int64(tk.limit)-tk.held.Load() < int64(tk.refill) {
			select {
			case <-tk.freed:
			case <-ctx.Done():
				return
			}
		}
		n := tk.scriptCap(min(lo.BatchSize, tk.limit-int(tk.held.Load())))
		if !nextExpiry.IsZero() && !q.ServerNow().Before(nextExpiry) {
			if _, err := q.Sweep(ctx, o.SweepBatch); err != nil && !ended(ctx) {
				tk.onError("sweep", err)
			}
		}
		if takeReq == "" {
			takeReq = q.req.next()
		}
		tk.s.setMaybe(tk, true)
		tk.s.fetchStart(tk)
		sent := time.Now()
		b, err := tk.takeOrEnd(ctx, n, takeReq)
		// ErrCorrupt and ErrRecordLost come with a batch of good tasks.
		partial := errors.Is(err, ErrCorrupt) || errors.Is(err, ErrRecordLost)
		if err != nil && !partial {
			if ended(ctx) {
				tk.reclaimTake(ctx, n, takeReq)
				return
			}
			if !taken && refused(err) {
				// Refused before any take of this Run: an ACL or a login
				// that retrying cannot fix, as at the start-up Check.
				tk.onError("take", err)
				fail(errFatal{fmt.Errorf("delay: queue %s: %w", q.name, err)})
				return
			}
			if !errors.Is(err, ErrRedis) {
				takeReq = "" // refused, not lost: the next take is a new call
			}
			tk.s.took(tk, nil, false)
			tk.s.setMaybe(tk, false) // as at start-up: a failing queue holds no line back
			tk.dueBy.Store(0)
			tk.onError("take", err)
			failures++
			sleepCtx(ctx, tk.reconnectDelay(failures))
			continue
		}
		takeReq, taken = "", true
		if err != nil {
			tk.onError("take", err)
		}
		failures = 0
		tk.held.Add(int64(len(b.Tasks)))
		if len(b.Tasks) > 0 {
			tk.dueBy.Store(time.Now().UnixMilli())
		}
		full := len(b.Tasks) == n && b.NextToken.IsZero()
		if !b.Paused && len(b.Tasks) > 0 && time.Since(sent) >= pauseStale && tk.pausedLate(ctx) {
			// taken before a Pause whose word the late reply missed
			tk.held.Add(-int64(len(b.Tasks)))
			tk.releaseAll(ctx, b.Tasks)
			b.Tasks, b.Paused, full = nil, true, false
		}
		if b.Paused {
			tk.releaseBuffered(ctx) // prefetched before the pause: not to start
		} else {
			tk.okAt.Store(max(tk.okAt.Load(), sent.UnixNano()))
		}
		tk.s.took(tk, b.Tasks, full)
		nextExpiry = b.NextExpiry
		if full {
			continue // there may be more due right now
		}
		// Paused or out of tokens, a queue has nothing due for the pool
		// (Strict serves the lines below it meanwhile).
		tk.s.setMaybe(tk, false)
		wait := o.IdleCheck
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
			tk.dueBy.Store(time.Now().Add(max(next.Sub(now), 0)).UnixMilli())
		} else {
			tk.dueBy.Store(0)
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
		case <-tk.wake:
		case <-ctx.Done():
		}
		timer.Stop()
	}
}

// takeOrEnd is q.take, except that the end of ctx ends the wait for its
// reply: go-redis ends a read at a deadline but not at a cancel, so a
// take whose reply is late (a slow or frozen link) would otherwise hold
// Run past its ShutdownTimeout. The caller then sends the take again as
// the same call (reclaimTake): whichever of the two runs first takes the
// tasks and the other gets its kept reply, so the tasks are released
// either way, and the abandoned call's reply is dropped.
func (tk *taker) takeOrEnd(ctx context.Context, n int, req string) (takeBatch, error) {
	type result struct {
		b   takeBatch
		err error
	}
	ch := make(chan result, 1)
	go func() {
		b, err := tk.q.take(ctx, n, req)
		ch <- result{b, err}
	}()
	select {
	case r := <-ch:
		return r.b, r.err
	case <-ctx.Done():
		return takeBatch{}, ctx.Err()
	}
}

// wakeLoop blocks on the wake list on its own connection; a pop means a
// task became the new head, so the take loop re-takes and re-arms its timer.
// A refusal (login or ACL, see refused) before its first answer ends the
// pool's Run, named, as a refused take does: retrying cannot fix it, and
// without wake-ups a new task would wait for IdleCheck.
func (tk *taker) wakeLoop(ctx context.Context, fail context.CancelCauseFunc) {
	c := tk.p.o.WakeClient
	if c == nil {
		c = tk.q.c
	}
	failures := 0
	answered := false // a BLPOP of this Run answered
	for ctx.Err() == nil {
		_, err := c.BLPop(ctx, tk.p.o.WakeBlock, tk.q.k.wake).Result()
		switch {
		case err == nil:
			failures, answered = 0, true
			select {
			case tk.wake <- struct{}{}:
			default:
			}
		case errors.Is(err, redis.Nil):
			failures, answered = 0, true
		case ended(ctx) || errors.Is(err, redis.ErrClosed):
			return
		case !answered && refused(err):
			err = wrapErr(ctx, "wake", err)
			tk.onError("wake", err)
			fail(errFatal{fmt.Errorf("delay: queue %s: %w", tk.q.name, err)})
			return
		default:
			failures++
			tk.onError("wake", wrapErr(ctx, "wake", err))
			sleepCtx(ctx, tk.reconnectDelay(failures))
		}
	}
}

// releaseAll gives unstarted tasks back; a failure leaves them to their
// leases, which is where they would be without the release.
func (tk *taker) releaseAll(ctx context.Context, tasks []*Task) {
	if len(tasks) == 0 {
		return
	}
	q := tk.q
	rctx, cancel := completionCtx(ctx)
	defer cancel()
	errs, err := q.release(rctx, tasks)
	if err != nil {
		tk.onError("release", err)
		return
	}
	for _, e := range errs {
		if e != nil {
			q.o.obs.OnError(q.name, "release", e)
		}
	}
}

// HandleResult is how a handler call ended, as Observer.OnHandled
// reports it. Its value is its metric label.
type HandleResult string

// Handler call results.
const (
	// HandleOK: the handler returned nil; the task is acked.
	HandleOK HandleResult = "ok"
	// HandleError: it returned an error; the task is retried (or
	// dead-lettered at MaxAttempts).
	HandleError HandleResult = "error"
	// HandleSkipRetry: it returned an error wrapping ErrSkipRetry; the task
	// is dead-lettered.
	HandleSkipRetry HandleResult = "skip_retry"
	// HandlePanic: it panicked; the task is retried.
	HandlePanic HandleResult = "panic"
	// HandleShutdown: it returned an error after the pool's
	// ShutdownTimeout cancelled its ctx; the task is released back to
	// due, its attempt not counted.
	HandleShutdown HandleResult = "shutdown"
)

// handle runs the line's handler on t and applies its outcome. Before the
// pool's ShutdownTimeout, acks go through the batching ack loop; after
// it, every outcome is applied directly, with a bounded ctx of its own.
func (tk *taker) handle(ctx context.Context, t *Task) {
	q := tk.q
	var stop func() error
	if tk.p.o.AutoExtend {
		stop = q.keepAlive(ctx, t, 0)
	}
	began := time.Now()
	err, panicked := tk.call(ctx, t)
	took := time.Since(began)
	if stop != nil {
		_ = stop()
	}
	res := HandleOK
	switch {
	case err == nil:
	case ctx.Err() != nil:
		res = HandleShutdown
	case panicked:
		res = HandlePanic
	case errors.Is(err, ErrSkipRetry):
		res = HandleSkipRetry
	default:
		res = HandleError
	}
	q.o.obs.OnHandled(q.name, took, res)
	var out outcome
	defer func() { tk.hist.record(q.ServerNow(), res, out, t.Lateness()) }()
	switch res {
	case HandleOK:
		tk.ackMu.RLock()
		if !tk.ackClosed {
			tk.acks <- t.lease
			tk.ackMu.RUnlock()
			return
		}
		tk.ackMu.RUnlock()
		// The ack loop has stopped: ack directly, retrying transport
		// errors as it would (6 attempts, each with its own 5 s bound),
		// every attempt the same call: an ack that ran and lost its reply
		// then answers with its kept reply, not "not found".
		req := q.req.next()
		for attempt := 1; ; attempt++ {
			actx, acancel := completionCtx(ctx)
			errs, aerr := q.ackMany(actx, []leaseRef{t.lease}, req)
			acancel()
			if aerr == nil {
				aerr = errs[0]
			}
			if aerr == nil {
				break
			}
			tk.onError("ack", aerr)
			if !errors.Is(aerr, ErrRedis) || attempt >= 6 {
				break // the lease brings the task back
			}
			time.Sleep(tk.reconnectDelay(attempt))
		}
	case HandleShutdown:
		// Interrupted by the shutdown, not failed: back to due at its
		// score, the attempt not counted.
		q.o.obs.OnError(q.name, "handle", err)
		tk.releaseAll(ctx, []*Task{t}) // with a bounded ctx of its own
	case HandleSkipRetry:
		cctx, cancel := completionCtx(ctx)
		defer cancel()
		var kerr error
		if out, kerr = q.killTask(cctx, t, err); kerr != nil {
			q.o.obs.OnError(q.name, "kill", kerr)
		}
	default:
		cctx, cancel := completionCtx(ctx)
		defer cancel()
		var rerr error
		var ra *retryAfterError
		if errors.As(err, &ra) {
			out, rerr = q.retryAfter(cctx, t, ra.d, err)
		} else {
			out, rerr = q.retry(cctx, t, err)
		}
		if rerr != nil {
			q.o.obs.OnError(q.name, "retry", rerr)
		}
	}
}

// completionCtx bounds one call that records work already done (an ack,
// retry, kill, release or history write) at 5 s, whatever ctx has become:
// after a shutdown the worker's ctx has ended, and the outcome must still
// reach Redis. It is made only where a call goes out, not for every
// handled task: a timer-backed ctx is a real share of a cheap handler's
// cost (docs/benchmarks.md, "One queue, before and after the business
// lines"), and an ack goes to the ack loop, which bounds its own calls.
func completionCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
}

func (tk *taker) call(ctx context.Context, t *Task) (err error, panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			err, panicked = fmt.Errorf("%w: %v", ErrPanic, r), true
		}
	}()
	return tk.l.h(ctx, t), false
}

// closeAcks stops the ack loop after it sent what was queued; later acks
// go directly to Redis.
func (tk *taker) closeAcks() {
	tk.ackMu.Lock()
	tk.ackClosed = true
	tk.ackMu.Unlock()
	close(tk.quit)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
