package delay

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// enqueueGroup merges concurrent Enqueue calls on one Queue (group
// commit). Each Enqueue alone is one script call, and the server's fixed
// cost of a call (script start, TIME, counter and index reads, wake check)
// is several times its cost per job inside a batch: a cart service that
// enqueues from many request goroutines would otherwise be capped by that
// fixed cost. So a call that finds fewer than maxGroupFlying calls on
// their way goes at once, from its caller's goroutine, exactly as without
// the group; calls that arrive meanwhile queue up, and when a call
// returns, one goroutine sends all that queued as one EnqueueBatch (up to
// MaxBatch a round trip), and so on until none are left. A lone caller never waits for anyone; a caller
// under load waits at most for the round trip in flight and then its own.
type enqueueGroup struct {
	mu sync.Mutex
	// flying counts the calls and batches on their way; at
	// maxGroupFlying, new calls queue.
	flying int
	// pending are the calls waiting for the next batch, in arrival order.
	pending []*enqueueWait
}

// maxGroupFlying is how many calls or batches of one Queue may be on
// their way at once. With one, Redis would sit idle while each reply
// travels back and the next batch is built; under many goroutines two
// gave the most throughput, three or four no more.
const maxGroupFlying = 2

// enqueueWait is one queued Enqueue call. The drain goroutine sets res and
// err, then closes done; taken (under mu) means it is in a batch.
type enqueueWait struct {
	ctx   context.Context
	job   Job
	mode  string
	v     int64
	taken bool
	done  chan struct{}
	res   Enqueued
	err   error
}

func (g *enqueueGroup) enqueue(ctx context.Context, q *Queue, j Job, mode string, v int64) (Enqueued, error) {
	g.mu.Lock()
	if g.flying < maxGroupFlying {
		g.flying++
		g.mu.Unlock()
		e, err := q.enqueueOne(ctx, j, mode, v)
		g.handOff(q)
		return e, err
	}
	w := &enqueueWait{ctx: ctx, job: j, mode: mode, v: v, done: make(chan struct{})}
	g.pending = append(g.pending, w)
	g.mu.Unlock()
	select {
	case <-w.done:
		return w.res, w.err
	case <-ctx.Done():
	}
	g.mu.Lock()
	taken := w.taken
	if !taken {
		g.remove(w)
	}
	g.mu.Unlock()
	if !taken {
		return Enqueued{}, fmt.Errorf("delay: enqueue: %w (nothing sent)", ctx.Err())
	}
	// Its batch is on its way: like a call cancelled on the wire, the
	// outcome is unknown to this caller (List by key tells).
	return Enqueued{}, fmt.Errorf("delay: enqueue: %w", ctx.Err())
}

// remove drops w from pending (mu held).
func (g *enqueueGroup) remove(w *enqueueWait) {
	for i, p := range g.pending {
		if p == w {
			g.pending = append(g.pending[:i], g.pending[i+1:]...)
			return
		}
	}
}

// handOff ends a call's turn: the group goes idle, or a goroutine sends
// what queued meanwhile.
func (g *enqueueGroup) handOff(q *Queue) {
	g.mu.Lock()
	if len(g.pending) == 0 {
		g.flying--
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	go g.drain(q)
}

// drain sends the queued calls, MaxBatch at a time, until none are left.
// Calls whose ctx ended before their batch formed are left out: they
// return on their own and nothing of theirs is sent.
func (g *enqueueGroup) drain(q *Queue) {
	for {
		g.mu.Lock()
		var batch []*enqueueWait
		k := 0
		for ; k < len(g.pending) && len(batch) < MaxBatch; k++ {
			w := g.pending[k]
			if w.ctx.Err() != nil {
				continue
			}
			w.taken = true
			batch = append(batch, w)
		}
		g.pending = g.pending[k:]
		if len(g.pending) == 0 {
			g.pending = nil // let the array go
		}
		if len(batch) == 0 {
			g.flying--
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		g.send(q, batch)
	}
}

// send runs one batch and hands each call its outcome. No single caller's
// cancellation may fail the others' jobs, so the batch runs without their
// cancellation, under the latest of their deadlines (none if one has none).
func (g *enqueueGroup) send(q *Queue, batch []*enqueueWait) {
	ctx, cancel := batchContext(batch)
	defer cancel()
	if len(batch) == 1 {
		w := batch[0]
		w.res, w.err = q.enqueueOne(ctx, w.job, w.mode, w.v)
		close(w.done)
		return
	}
	jobs := make([]Job, len(batch))
	todo := make([]checkedJob, len(batch))
	for i, w := range batch {
		jobs[i] = w.job
		todo[i] = checkedJob{i, w.mode, w.v} // Enqueue checked it
	}
	res := make([]Enqueued, len(batch))
	err := q.enqueueChecked(ctx, jobs, todo, res)
	for i, w := range batch {
		w.res, w.err = res[i], res[i].Err
		w.res.Err = nil
		if w.err == nil && w.res.ID == "" {
			// a transport failure stopped the batch before this job's reply
			w.err = err
			if w.err == nil {
				w.err = fmt.Errorf("delay: enqueue %q: %w: no outcome", w.job.Key, ErrCorrupt)
			}
		}
		close(w.done)
	}
}

func batchContext(batch []*enqueueWait) (context.Context, context.CancelFunc) {
	base := context.WithoutCancel(batch[0].ctx)
	var last time.Time
	for _, w := range batch {
		d, ok := w.ctx.Deadline()
		if !ok {
			return base, func() {}
		}
		if d.After(last) {
			last = d
		}
	}
	return context.WithDeadline(base, last)
}
