package delay

import (
	"context"
	"time"
)

// pauseCheck is how old the last word on a queue's pause may be while its
// taker holds prefetched tasks no handler started: past it the taker asks
// Redis. A pause set by any process then reaches the prefetch within
// pauseCheck plus a round trip, well inside Pause's promise of no start
// 100 ms after it returns. The question costs nothing while takes answer
// it (a draining worker takes more often than this) or while nothing
// waits in the buffer.
const pauseCheck = 25 * time.Millisecond

// pauseStale is how long a take's reply may take to come: a take
// answered later (a slow link, a stall) may have run before a Pause that
// returned since, and its reply does not say so. The taker then asks
// Redis once before its tasks may start, so a late reply's tasks start
// within a round trip of the pause at most, like the prefetch's.
const pauseStale = 3 * pauseCheck

// pausedLate reports whether the queue is paused now, asked after a take
// whose reply came pauseStale or more after it was sent. A Redis error
// is reported and answers no: the take said not paused.
func (tk *taker) pausedLate(ctx context.Context) bool {
	sent := time.Now()
	paused, err := tk.q.c.HExists(ctx, tk.q.k.ctl, "paused").Result()
	if err != nil {
		tk.onError("pause check", wrapErr(ctx, "pause check", err))
		return false
	}
	if !paused {
		tk.okAt.Store(sent.UnixNano())
	}
	return paused
}

// watchPause releases the taker's prefetched tasks once its queue is
// paused. Each take says whether the queue is paused, but a taker whose
// buffer is full does not take; the take script alone would let a worker
// run its whole prefetch after a Pause.
func (tk *taker) watchPause(ctx context.Context) {
	for {
		select {
		case <-tk.pushed:
		case <-ctx.Done():
			return
		}
		for ctx.Err() == nil && tk.s.buffered(tk) > 0 {
			if wait := pauseCheck - time.Since(time.Unix(0, tk.okAt.Load())); wait > 0 {
				sleepCtx(ctx, wait)
				continue
			}
			sent := time.Now()
			paused, err := tk.q.c.HExists(ctx, tk.q.k.ctl, "paused").Result()
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				tk.onError("pause check", wrapErr(ctx, "pause check", err))
				sleepCtx(ctx, pauseCheck)
			case paused:
				tk.releaseBuffered(ctx)
			default:
				tk.okAt.Store(sent.UnixNano())
			}
		}
	}
}

// releaseBuffered gives the taker's prefetched tasks back to due, their
// attempt not counted, because the queue was paused.
func (tk *taker) releaseBuffered(ctx context.Context) {
	ts := tk.s.unbuffer(tk)
	if len(ts) == 0 {
		return
	}
	tk.releaseAll(ctx, ts)
	for range ts {
		tk.done()
	}
}

// reclaimTake is the end of a take whose ctx ended before its reply came:
// a deadline ends go-redis's read (a cancel does not), and the take may
// have run. Sent again as the same call under a ctx of its own, it gets
// the first run's kept reply (or, if the first never ran, takes anew),
// and what it took goes back to due at once, the attempt not counted,
// instead of waiting out a lease nobody holds.
func (tk *taker) reclaimTake(ctx context.Context, n int, req string) {
	tk.s.took(tk, nil, false)
	rctx, cancel := completionCtx(ctx)
	defer cancel()
	b, err := tk.q.take(rctx, n, req)
	if err != nil {
		tk.onError("take", err)
	}
	tk.releaseAll(ctx, b.Tasks)
}
