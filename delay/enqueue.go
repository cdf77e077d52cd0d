package delay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

func (q *Queue) enqueueKeys() []string {
	return []string{q.k.due, q.k.inflight, q.k.dead, q.k.tasks, q.k.idx, q.k.ctr, q.k.stats, q.k.wake}
}

// Limits of one enqueue script call. A call costs the server a fixed
// overhead (script start, TIME, the index and counter reads, the wake
// check) plus a few µs per job, so EnqueueBatch packs up to
// maxEnqueueJobs jobs into one call; maxEnqueueBytes keeps a call's
// arguments (and the time the script holds the server) bounded when
// payloads are large. A single job above maxEnqueueBytes still goes alone.
const (
	maxEnqueueJobs  = 250
	maxEnqueueBytes = 1 << 20
)

// enqueueCall is one script call: jobs[idx[k]] is its k-th job.
// A call's request ID is drawn once, so a resend of the call (after
// NOSCRIPT, or by go-redis) is the same call.
type enqueueCall struct {
	idx  []int
	keys []string
	args []any
}

func (q *Queue) newEnqueueCall(jobs int) enqueueCall {
	c := enqueueCall{idx: make([]int, 0, jobs), args: make([]any, 0, 5+3*jobs),
		keys: q.onceKeys(q.enqueueKeys(), q.req.next())}
	c.args = append(c.args, q.epoch, q.mult, q.o.Codec.MaxMs(), maxTasksPerKey)
	return c
}

func (q *Queue) add(c *enqueueCall, i int, j Job, mode string, v int64) {
	dg := digest(j.Key)
	c.idx = append(c.idx, i)
	c.args = append(c.args, dg, freshRecord(dg, j.Key, j.Token, j.Payload), q.whenArg(mode, v))
}

// whenArg is the due time as the enqueue scripts take it: ms after the
// codec epoch for "at" (never negative: whenArgs checked it), or
// -(delay ms + 1) for "after", one number instead of a mode and a value.
func (q *Queue) whenArg(mode string, v int64) int64 {
	if mode == "after" {
		return -v - 1
	}
	return v - q.epoch
}

func (q *Queue) evalEnqueue(ctx context.Context, c redis.Scripter, call enqueueCall) *redis.Cmd {
	return scriptEnqueueBatch.EvalSha(ctx, c, call.keys, q.onceArgs(call.args)...)
}

// Enqueue adds a task, or reports the existing one when (Key, Token) is
// already there (Duplicate, with its ID and state; its due time never moves).
//
// Calls made at the same time from many goroutines are merged: a call that
// finds none on its way to Redis goes at once, alone; calls that arrive
// while one is on its way wait for it and then go together, as one
// EnqueueBatch (see enqueueGroup). The outcome of each is the one it would
// have had alone. A call whose ctx ends while it waits sends nothing.
func (q *Queue) Enqueue(ctx context.Context, j Job) (Enqueued, error) {
	mode, v, err := q.checkJob(j)
	if err != nil {
		return Enqueued{}, err
	}
	if err := ctx.Err(); err != nil {
		return Enqueued{}, fmt.Errorf("delay: enqueue: %w", err)
	}
	return q.group.enqueue(ctx, q, j, mode, v)
}

// enqueueOne is one Enqueue as one call of the one-job script.
func (q *Queue) enqueueOne(ctx context.Context, j Job, mode string, v int64) (Enqueued, error) {
	sent := q.o.Now()
	dg := digest(j.Key)
	var r reply
	for repaired := false; ; repaired = true {
		var err error
		// a refused call changed nothing: the one after the repair is a
		// new call, with its own request ID
		r, err = q.mutate(ctx, scriptEnqueue, "enqueue", q.req.next(), q.enqueueKeys(),
			j.Key, dg, j.Token, freshRecord(dg, j.Key, j.Token, j.Payload), q.whenArg(mode, v),
			q.epoch, q.mult, q.o.Codec.MaxMs(), maxTasksPerKey)
		if err != nil {
			return Enqueued{}, err
		}
		if c := r.int(0); repaired || (c != codeCtrLost && c != codeIdxLost) {
			break
		}
		// refused before any write: repair once, then send again
		if _, err := q.Repair(ctx); err != nil {
			return Enqueued{}, err
		}
	}
	// enqueue.lua: {C_OK, id, score, now} | {C_DUP|C_RESTORED, id, state, score, now} | {code}
	switch r.int(0) {
	case codeOK:
		q.observeTime(r.int(3), sent, q.o.Now())
		e, err := q.enqueued(j, reply{r.int(0), r.str(1), "", r.str(2)}, 0)
		if err == nil {
			q.noteSeq(r.int(3), e.Seq)
		}
		return e, err
	case codeDup, codeRestored:
		q.observeTime(r.int(4), sent, q.o.Now())
		return q.enqueued(j, r, 0)
	}
	return q.enqueued(j, reply{r.int(0), "", "", ""}, 0)
}

// batchEnqueued reads the outcome of one job, element off of an
// enqueue_batch.lua reply: a task's score when the job made one (its ID is
// the next of *id, which the script's reply starts at), else {code, id,
// state, score} or {code}.
func (q *Queue) batchEnqueued(j Job, r reply, off int, id *int64) (Enqueued, error) {
	if off >= len(r) {
		return Enqueued{}, fmt.Errorf("delay: enqueue %q: %w: short script reply", j.Key, ErrCorrupt)
	}
	switch v := r[off].(type) {
	case int64:
		*id++
		return q.enqueued(j, reply{int64(codeOK), strconv.FormatInt(*id, 36), "", v}, 0)
	case []any:
		if len(v) == 1 {
			v = append(v, "", "", "")
		}
		return q.enqueued(j, reply(v), 0)
	}
	return Enqueued{}, fmt.Errorf("delay: enqueue %q: %w: script reply element %T", j.Key, ErrCorrupt, r[off])
}

// enqueued reads the outcome of one job from offset off of r: code, id,
// state, score.
func (q *Queue) enqueued(j Job, r reply, off int) (Enqueued, error) {
	if off+3 >= len(r) {
		return Enqueued{}, fmt.Errorf("delay: enqueue %q: %w: short script reply", j.Key, ErrCorrupt)
	}
	code := r.int(off)
	if err := codeErr(code); err != nil {
		return Enqueued{}, fmt.Errorf("delay: enqueue %q: %w", j.Key, err)
	}
	var e Enqueued
	var sc int64
	var ok bool
	switch code {
	case codeOK:
		e = Enqueued{ID: r.str(off + 1), State: StatePending}
		sc, ok = r.score(off + 3)
	case codeDup:
		e = Enqueued{ID: r.str(off + 1), State: State(r.str(off + 2)), Duplicate: true}
		if e.State == StatePending {
			sc, ok = r.score(off + 3)
		}
	case codeRestored:
		e = Enqueued{ID: r.str(off + 1), State: StatePending, Restored: true}
		sc, ok = r.score(off + 3)
		q.o.obs.OnLoss(q.name, fmt.Errorf("%w: task %s of %q put back in due", ErrDueLost, e.ID, j.Key), 1)
	}
	e.Token = j.Token
	if e.Token == "" {
		e.Token = e.ID
	}
	if ok {
		t, seq, err := q.o.Codec.DecodeTime(sc)
		if err != nil {
			return Enqueued{}, fmt.Errorf("%w: due score %d: %w", ErrCorrupt, sc, err)
		}
		e.Due, e.Seq = t, seq
	}
	q.o.obs.OnEnqueue(q.name, e.Duplicate)
	return e, nil
}

// EnqueueBatch enqueues jobs in order, with the outcome of enqueueing them
// one by one (duplicates within jobs included), through script calls of up
// to a few hundred jobs each, one pipeline (one round trip) per MaxBatch
// jobs. Each result carries its own Err; invalid jobs are not sent. The
// returned error is for the transport as a whole.
func (q *Queue) EnqueueBatch(ctx context.Context, jobs []Job) ([]Enqueued, error) {
	out := make([]Enqueued, len(jobs))
	var todo []checkedJob
	for i, j := range jobs {
		mode, v, err := q.checkJob(j)
		if err != nil {
			out[i].Err = err
			continue
		}
		todo = append(todo, checkedJob{i, mode, v})
	}
	return out, q.enqueueChecked(ctx, jobs, todo, out)
}

// checkedJob is jobs[i] of an enqueue once checkJob passed it, with the
// due time as the script takes it.
type checkedJob struct {
	i    int
	mode string
	v    int64
}

// enqueueChecked is EnqueueBatch after validation (grouped Enqueue calls,
// checked once in Enqueue, come in here too): it fills out[p.i] for every
// p in todo, in order.
func (q *Queue) enqueueChecked(ctx context.Context, jobs []Job, todo []checkedJob, out []Enqueued) error {
	if err := checkSlot("enqueue batch", q.onceKeys(q.enqueueKeys(), "")); err != nil {
		return err
	}
	if len(todo) > 0 && !q.enqueueLoaded.Load() {
		if err := scriptEnqueueBatch.Load(ctx, q.c).Err(); err != nil {
			return wrapErr(ctx, "enqueue: script load", err)
		}
		q.enqueueLoaded.Store(true)
	}
	repaired := false
	for start := 0; start < len(todo); start += MaxBatch {
		var calls []enqueueCall
		chunk := todo[start:min(start+MaxBatch, len(todo))]
		call, size := q.newEnqueueCall(min(len(chunk), maxEnqueueJobs)), 0
		for _, p := range chunk {
			j := jobs[p.i]
			n := len(j.Key) + len(j.Token) + len(j.Payload)
			if len(call.idx) == maxEnqueueJobs || (len(call.idx) > 0 && size+n > maxEnqueueBytes) {
				calls = append(calls, call)
				call, size = q.newEnqueueCall(maxEnqueueJobs), 0
			}
			q.add(&call, p.i, j, p.mode, p.v)
			size += n
		}
		calls = append(calls, call)
		var moving time.Time // when a slot migration first refused a call
		reloaded := false
		for len(calls) > 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("delay: enqueue batch: %w", err)
			}
			sent := q.o.Now()
			pipe := q.c.Pipeline()
			cmds := make([]*redis.Cmd, len(calls))
			for k, c := range calls {
				cmds[k] = q.evalEnqueue(ctx, pipe, c)
			}
			_, perr := pipe.Exec(ctx)
			recv := q.o.Now()
			var retry []enqueueCall
			noScript, refused := false, false
			lost := false
			for k, c := range calls {
				v, err := cmds[k].Slice()
				switch {
				case isNoScript(err) && !reloaded:
					retry, noScript = append(retry, c), true
				case migrating(err) && (moving.IsZero() || time.Since(moving) < q.migrationWait()):
					// the same call again, as runFor does
					retry, refused = append(retry, c), true
				case err != nil:
					for _, i := range c.idx {
						out[i].Err = wrapErr(ctx, "enqueue", err)
					}
				case err == nil && len(v) == 1 && reply(v).int(0) < 0:
					// {-code}: refused before any write (counter or index lost)
					code := -reply(v).int(0)
					if !repaired && (code == codeCtrLost || code == codeIdxLost) {
						lost = true
						// its refusal is kept under its request ID: after
						// the repair it goes again as a new call
						c.keys = q.onceKeys(q.enqueueKeys(), q.req.next())
						retry = append(retry, c)
						continue
					}
					for _, i := range c.idx {
						out[i].Err = fmt.Errorf("delay: enqueue %q: %w", jobs[i].Key, codeErr(code))
					}
				default:
					r := reply(v)
					q.observeTime(r.int(0), sent, recv)
					id := r.int(1)
					top := int64(-1) // the largest seq a new task was given
					for n, i := range c.idx {
						out[i], out[i].Err = q.batchEnqueued(jobs[i], r, 2+n, &id)
						if out[i].Err == nil && !out[i].Duplicate && !out[i].Restored {
							top = max(top, out[i].Seq)
						}
					}
					if top >= 0 {
						q.noteSeq(r.int(0), top)
					}
				}
			}
			if perr != nil && !isRedisReplyErr(perr) {
				// A transport failure reached every command of the chunk.
				return wrapErr(ctx, "enqueue batch", perr)
			}
			if lost {
				if _, err := q.Repair(ctx); err != nil {
					return err
				}
				repaired = true
			}
			if noScript {
				// Redis lost its script cache (restart, failover): load, resend those.
				if err := scriptEnqueueBatch.Load(ctx, q.c).Err(); err != nil {
					return wrapErr(ctx, "enqueue: script load", err)
				}
				reloaded = true
			}
			if refused {
				if moving.IsZero() {
					moving = time.Now()
				}
				if !pause(ctx, migrationPause) {
					return fmt.Errorf("delay: enqueue batch: %w", ctx.Err())
				}
			}
			calls = retry
		}
	}
	return nil
}

func isRedisReplyErr(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}
