package budget

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Group commit. Concurrent Reserve calls of one Budget in one process
// share a script: a call made while nothing of the Budget's is in flight
// goes at once, alone (no added latency); calls made meanwhile queue and
// go together in the next, up to Options.MaxBatch. One batch flies at a
// time: with two, a batch whose reply was cut could be cut again on each
// of go-redis's re-sends by faults that the other's callers meet
// (TestFaultObserverExactUnderCuts saw it), and two were not clearly
// faster on this 2-core machine (docs/benchmarks.md).
// reserve.lua judges them one after another, each all or none on its own,
// and reads Redis TIME, the epoch and the keyset and purges once a batch:
// the server's cost per reservation is what falls (docs/benchmarks.md, "A
// cap against PostgreSQL").
//
// A call sent alone runs on its caller's goroutine and ctx, as before
// batching. A batch of queued calls runs on a goroutine of its own, under
// the context values of the call that started it without its
// cancellation, bounded by the latest deadline of its callers (none if
// one has none: go-redis's timeouts then bound it). A caller whose ctx
// ends while its request waits in the queue takes it out and gets
// ctx.Err() (nothing was sent); one whose ctx ends while its batch is in
// flight gets ErrUnknown, and the batch settles its request (expiry
// task, Observer) when the reply comes. A call sent alone whose deadline
// ends before the reply gets ErrUnknown too, with nothing to settle: its
// expiry task is Sweep's, as after any lost reply; so does every caller
// of a batch its latest deadline ended, and every caller of a script
// whose reply the connection lost (unanswered). A call sent alone that is
// cancelled waits for its reply: go-redis bounds a read by deadlines,
// not by cancellation. A ctx ended before anything was sent gets its
// error: nothing was.

// pending is one request of a batch.
type pending struct {
	order string
	bd    body
	// arg is its argument of reserve.lua: order, req, hold ms, mode and
	// token, each followed by a tab, then its caps (appendCaps).
	arg  string
	refs []capRef
	// deadline is the caller's ctx deadline (ok false: none).
	deadline time.Time
	ok       bool

	done chan struct{} // closed when answered
	// state, rp and err are guarded by batcher.mu until done is closed.
	state int
	rp    reply
	err   error
}

const (
	queued    = iota // in the queue: not sent
	sent             // in a batch in flight
	abandoned        // in flight, and its caller gone (ErrUnknown)
	answered         // rp and err are set
)

// batcher is a Budget's queue of requests and whether a batch is in
// flight.
type batcher struct {
	mu    sync.Mutex
	queue []*pending
	busy  bool // a batch (or a call alone) is in flight
}

// newPending builds a request judged for Redis TIME about now. Its
// argument is one string, built in one buffer on the caller's goroutine:
// an argument a request, not six, to box, copy and send in the batch.
func (b *Budget) newPending(order string, bd body, ps []Promotion, hold time.Duration, mode, token string, now time.Time) *pending {
	var ba [512]byte // on the stack for a small cart
	buf := append(ba[:0], order...)
	buf = append(buf, '\t')
	buf = bd.appendEncoded(buf)
	buf = append(buf, '\t')
	buf = strconv.AppendInt(buf, hold.Milliseconds(), 10)
	buf = append(buf, '\t')
	buf = append(buf, mode...)
	buf = append(buf, '\t')
	buf = append(buf, token...)
	buf = append(buf, '\t')
	buf, refs := appendCaps(buf, bd, ps, now)
	return &pending{order: order, bd: bd, arg: string(buf), refs: refs, done: make(chan struct{})}
}

// submit sends p in the next batch and waits for its reply. A call that
// finds nothing in flight (so nothing queued) is sent at once, alone, on
// its own goroutine and ctx (no hop to another goroutine: no added
// latency); the calls that queued meanwhile then go in a batch of their
// own.
func (b *Budget) submit(ctx context.Context, p *pending) (reply, error) {
	if b.o.MaxBatch == 1 {
		return b.alone(ctx, p)
	}
	p.deadline, p.ok = ctx.Deadline()
	bt := &b.batch
	bt.mu.Lock()
	if !bt.busy {
		bt.busy = true
		bt.mu.Unlock()
		rp, err := b.alone(ctx, p)
		bt.mu.Lock()
		if len(bt.queue) > 0 {
			go b.flush(context.WithoutCancel(ctx)) // stays busy
		} else {
			bt.busy = false
		}
		bt.mu.Unlock()
		return rp, err
	}
	bt.queue = append(bt.queue, p)
	bt.mu.Unlock()
	select {
	case <-p.done:
		return p.rp, p.err
	case <-ctx.Done():
	}
	bt.mu.Lock()
	defer bt.mu.Unlock()
	switch p.state {
	case queued:
		bt.queue = slices.DeleteFunc(bt.queue, func(q *pending) bool { return q == p })
		return nil, ctx.Err()
	case sent:
		p.state = abandoned
		return nil, fmt.Errorf("%w: order %q: %w", ErrUnknown, p.order, ctx.Err())
	}
	return p.rp, p.err // answered meanwhile
}

// flush sends batches until the queue is empty.
func (b *Budget) flush(base context.Context) {
	bt := &b.batch
	for {
		bt.mu.Lock()
		n := min(len(bt.queue), b.o.MaxBatch)
		if n == 0 {
			bt.busy = false
			bt.mu.Unlock()
			return
		}
		ps := slices.Clone(bt.queue[:n])
		bt.queue = slices.Clone(bt.queue[n:])
		for _, p := range ps {
			p.state = sent
		}
		bt.mu.Unlock()

		ctx, cancel := base, context.CancelFunc(func() {})
		if d, ok := latest(ps); ok {
			ctx, cancel = context.WithDeadline(base, d)
		}
		// Every caller's deadline may have passed while they were being
		// taken from the queue: then nothing is sent, a known outcome.
		rps, err, sent := make([]reply, len(ps)), ctx.Err(), false
		if err == nil {
			rps, err = b.runBatch(ctx, ps)
			sent = true
		}
		var orphans []*pending
		bt.mu.Lock()
		for i, p := range ps {
			p.rp, p.err = rps[i], err
			if sent && p.rp == nil {
				// Under the latest caller's deadline, its end races that
				// caller's own, and either way the script may have run
				// (TestFaultBatchDeadlines): the error matches ctx's.
				cause := err
				if ctx.Err() != nil {
					cause = ctx.Err()
				}
				p.err = unanswered(p.order, err, cause)
			}
			if p.state == abandoned {
				orphans = append(orphans, p)
			}
			p.state = answered
			close(p.done)
		}
		bt.mu.Unlock()
		for _, p := range orphans {
			if p.rp != nil {
				_, _ = b.settle(base, p.order, p.bd, p.rp, p.refs)
			}
		}
		cancel()
	}
}

// alone sends p by itself on ctx. A reply that did not come is
// ErrUnknown, as in a batch (unanswered); a ctx already ended sends
// nothing and answers its error.
func (b *Budget) alone(ctx context.Context, p *pending) (reply, error) {
	if err := ctx.Err(); err != nil {
		// Ended before anything was sent: the outcome is known, no hold
		// (go-redis would fail before writing, and that is no unknown).
		return nil, err
	}
	rps, err := b.runBatch(ctx, []*pending{p})
	if rps[0] == nil {
		err = unanswered(p.order, err, err)
	}
	return rps[0], err
}

// unanswered is the error of a request sent with no reply of its own: err
// as it is when nil or Redis's own answer (redisAnswered), else ErrUnknown
// for order wrapping cause.
func unanswered(order string, err, cause error) error {
	if err == nil || redisAnswered(err) {
		return err
	}
	return fmt.Errorf("%w: order %q: %w", ErrUnknown, order, cause)
}

// redisAnswered reports whether err is Redis's own reply that this call's
// script failed (a script error, OOM, WRONGTYPE): the outcome is that
// reply. Any other failure (a cut or timed-out reply, a reset connection,
// go-redis's retries used up, even a failed dial) leaves unknown whether
// the script ran: go-redis retries on a fresh connection, so an earlier
// try may have. So do the replies that refuse a try without running it
// (BUSY, LOADING, TRYAGAIN, MASTERDOWN, CLUSTERDOWN, READONLY), which
// go-redis may meet only on a retry (TestFaultUnknownBusyAfterCut).
func redisAnswered(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	for _, p := range []string{"BUSY", "LOADING", "TRYAGAIN", "MASTERDOWN", "CLUSTERDOWN", "READONLY"} {
		if redis.HasErrorPrefix(re, p) {
			return false
		}
	}
	return true
}

// latest is the latest deadline of ps; ok false when one has none.
func latest(ps []*pending) (time.Time, bool) {
	var d time.Time
	for _, p := range ps {
		if !p.ok {
			return time.Time{}, false
		}
		if p.deadline.After(d) {
			d = p.deadline
		}
	}
	return d, true
}

// runBatch runs reserve.lua over ps and returns each one's reply, a nil
// reply with the error when the script's outcome is unknown. An error
// with replies (ErrNotReplicated) is every request's.
func (b *Budget) runBatch(ctx context.Context, ps []*pending) ([]reply, error) {
	// The records' keys are derived in the script from the base (KEYS[1]).
	keys := []string{b.k.base, b.k.epoch, b.k.holds, b.k.unrep, b.k.log, b.k.keyset}
	args := make([]any, 0, 5+len(ps))
	args = append(args, b.o.RecordTTL.Milliseconds(), b.keepMs(), b.reportFlag(), b.o.LogMax, len(ps))
	for _, p := range ps {
		args = append(args, p.arg)
	}
	out := make([]reply, len(ps))
	rp, err := b.run(ctx, b.s.reserve, true, keys, args...)
	if rp == nil {
		return out, err
	}
	switch rp.status() {
	case "lost":
		for i := range out {
			out[i] = reply{"lost", rp[1]}
		}
		return out, err
	case "batch":
		if len(rp) == 3+len(ps) {
			// The new holds' replies share one array: one allocation a
			// batch, not one a request.
			var held []any
			for i := range out {
				if _, ok := rp[3+i].(int64); ok {
					// A new hold answers its expiry alone.
					if held == nil {
						held = make([]any, 0, 6*(len(ps)-i))
					}
					held = append(held, "ok", rp[1], rp[2], "h", rp[3+i], int64(1))
					out[i] = reply(held[len(held)-6 : len(held) : len(held)])
				} else if out[i] = reply(rp.list(3 + i)); len(out[i]) < 2 {
					return make([]reply, len(ps)), rp.unexpected("reserve")
				}
			}
			return out, err
		}
	}
	return out, rp.unexpected("reserve")
}
