package delay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/redisconf"
)

// Queue is one named delay queue. All of its state lives under one hash tag
// (see HashTag), so a sharded queue is K Queues side by side. A Queue is safe
// for concurrent use.
type Queue struct {
	c     redis.UniversalClient
	name  string
	k     keys
	o     Options
	epoch int64 // codec epoch, Unix ms
	mult  int64 // 2^bits
	// offsetMs estimates Redis TIME minus the client clock, from the TIME
	// every script reply carries. Only the worker's timer uses it.
	offsetMs atomic.Int64
	// enqueueLoaded records that this queue loaded the enqueue script. A
	// pipeline that met NOSCRIPT halfway (another client loading the script
	// while it ran) would resend its first jobs after its last ones and
	// break same-millisecond order, so EnqueueBatch loads before its first
	// pipeline instead of discovering the script's absence inside one.
	enqueueLoaded atomic.Bool
	// group merges concurrent Enqueue calls into batches.
	group enqueueGroup
	// req names each mutating call; keepMs is Options.ReplyTTL as the
	// scripts take it (see once.go).
	req    reqIDs
	keepMs string
}

// New returns the queue called name on c. It validates name and opts and
// sends nothing. c is a redis.UniversalClient because the queue needs
// scripts, pipelines (EnqueueBatch) and a blocking BLPOP (Worker); a
// *redis.Client and a *redis.ClusterClient both work.
func New(c redis.UniversalClient, name string, opts Options) (*Queue, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidOptions)
	}
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := redisconf.CheckDeadlines(c); err != nil {
		if !o.AllowNoContextTimeout {
			return nil, fmt.Errorf("%w: %w (or set Options.AllowNoContextTimeout)", ErrInvalidOptions, err)
		}
		o.Observer.OnWarning(name, fmt.Errorf("delay: %w", err))
	}
	k := newKeys(o.Prefix, name)
	// Names and prefixes without braces cannot move a key off the queue's
	// tag; checking the whole layout once here makes that a tested fact.
	if err := checkSlot("new", k.all()); err != nil {
		return nil, err
	}
	q := &Queue{
		c: c, name: name, k: k, o: o,
		epoch: o.Codec.EpochMs(), mult: int64(1) << o.Codec.Bits(),
		keepMs: strconv.FormatInt(o.ReplyTTL.Milliseconds(), 10),
	}
	q.req.nonce = newNonce()
	return q, nil
}

// Name returns the queue name.
func (q *Queue) Name() string { return q.name }

// Client returns the client the queue talks through.
func (q *Queue) Client() redis.UniversalClient { return q.c }

// Options returns the queue's options with defaults filled in.
func (q *Queue) Options() Options { return q.o }

// Keys lists the queue's fixed keys and the base name under which its
// record buckets live (base + ":" + suffix). All share the queue's hash
// tag, so the buckets do too.
func (q *Queue) Keys() []string { return q.k.all() }

// State is where a task is.
type State string

// Task states.
const (
	StatePending   State = "pending"   // in the due set, waiting for its time
	StateInFlight  State = "inflight"  // taken, under a lease
	StateCancelled State = "cancelled" // in flight but cancelled: its ack removes it, it is never retried
	StateDead      State = "dead"      // in the dead-letter set
	StateDone      State = "done"      // acked, its (Key, Token) kept for Options.DoneTTL
	StateUnknown   State = "unknown"
)

// When is a due time: absolute (At) or relative to Redis TIME (After).
// The zero When is "now". Times are rounded up to the next millisecond, so
// a task never runs before the instant asked for.
type When struct {
	At    time.Time
	After time.Duration
}

// At is "run at t" (for instance a time stored in a database).
func At(t time.Time) When { return When{At: t} }

// After is "run d after now", now being Redis TIME when the script runs.
func After(d time.Duration) When { return When{After: d} }

// Job is a task to enqueue.
type Job struct {
	// Key is the business key (an order ID, say): 1..MaxKeyBytes bytes, no
	// control characters. Cancel and Reschedule find tasks by it.
	Key string
	// Token makes (Key, Token) idempotent. Empty: the library makes one
	// (the task ID), so each such Enqueue is a new task.
	Token string
	// Payload is opaque, at most Options.MaxPayload bytes.
	Payload []byte
	When
}

// Enqueued reports the outcome of an Enqueue.
type Enqueued struct {
	ID    string
	Token string // the caller's token, or the generated one (= ID)
	// Due is the task's due time and Seq its sequence in that millisecond,
	// for a new or pending task (zero otherwise).
	Due time.Time
	Seq int64
	// Duplicate: (Key, Token) already existed; nothing was changed.
	Duplicate bool
	// Restored: (Key, Token) had a record in no set (Redis lost its due
	// entry); it is due again at the When asked for, under its old ID
	// (ErrDueLost, reported to Observer.OnLoss and in Stats.Restored).
	Restored bool
	State    State
	// Err is a per-job error in EnqueueBatch (nil in Enqueue's result).
	Err error
}

func (q *Queue) observeTime(nowMs int64, sent, recv time.Time) {
	if nowMs <= 0 {
		return
	}
	mid := sent.Add(recv.Sub(sent) / 2)
	q.offsetMs.Store(nowMs - mid.UnixMilli())
}

// ServerNow estimates Redis TIME from the client clock and the last
// measured offset.
func (q *Queue) ServerNow() time.Time {
	return q.o.Now().Add(time.Duration(q.offsetMs.Load()) * time.Millisecond)
}

func ceilMs(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }

func ceilUnixMs(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.Sub(time.UnixMilli(ms)) > 0 {
		ms++
	}
	return ms
}

// whenArgs checks w in Go (same codec as the script) and returns the
// script's mode and value.
func (q *Queue) whenArgs(w When) (string, int64, error) {
	if !w.At.IsZero() && w.After != 0 {
		return "", 0, ErrInvalidWhen
	}
	if !w.At.IsZero() {
		ms := ceilUnixMs(w.At)
		if _, err := q.o.Codec.Encode(ms, 0); err != nil {
			return "", 0, err
		}
		return "at", ms, nil
	}
	if w.After < 0 {
		return "", 0, fmt.Errorf("%w: %v", ErrNegativeDelay, w.After)
	}
	d := ceilMs(w.After)
	if _, err := q.o.Codec.Encode(q.ServerNow().UnixMilli()+d, 0); err != nil {
		return "", 0, err
	}
	return "after", d, nil
}

func (q *Queue) checkJob(j Job) (string, int64, error) {
	if err := validateKey(j.Key); err != nil {
		return "", 0, err
	}
	if err := validateToken(j.Token); err != nil {
		return "", 0, err
	}
	if len(j.Payload) > q.o.MaxPayload {
		return "", 0, fmt.Errorf("%w: %d bytes (max %d)", ErrPayloadTooLarge, len(j.Payload), q.o.MaxPayload)
	}
	return q.whenArgs(j.When)
}

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
	c.args = append(c.args, q.epoch, q.mult, q.o.Codec.MaxMs(), MaxTasksPerKey)
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
	return scriptEnqueue.EvalSha(ctx, c, call.keys, q.onceArgs(call.args)...)
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
		r, err = q.mutate(ctx, scriptEnqueueOne, "enqueue", q.req.next(), q.enqueueKeys(),
			j.Key, dg, j.Token, freshRecord(dg, j.Key, j.Token, j.Payload), q.whenArg(mode, v),
			q.epoch, q.mult, q.o.Codec.MaxMs(), MaxTasksPerKey)
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
		return q.enqueued(j, reply{r.int(0), r.str(1), "", r.str(2)}, 0)
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
		q.o.Observer.OnLoss(q.name, fmt.Errorf("%w: task %s of %q put back in due", ErrDueLost, e.ID, j.Key), 1)
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
	q.o.Observer.OnEnqueue(q.name, e.Duplicate)
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
		if err := scriptEnqueue.Load(ctx, q.c).Err(); err != nil {
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
		for attempt := 0; len(calls) > 0; attempt++ {
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
			lost := false
			for k, c := range calls {
				v, err := cmds[k].Slice()
				switch {
				case isNoScript(err) && attempt == 0:
					retry = append(retry, c)
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
					for n, i := range c.idx {
						out[i], out[i].Err = q.batchEnqueued(jobs[i], r, 2+n, &id)
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
			if len(retry) > 0 {
				// Redis lost its script cache (restart, failover): load, resend those.
				if err := scriptEnqueue.Load(ctx, q.c).Err(); err != nil {
					return wrapErr(ctx, "enqueue: script load", err)
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

// Lease identifies one delivery of a task: its ID and fencing token. Ack,
// Retry, Kill and Extend succeed only with the current lease.
type Lease struct {
	ID    string
	Fence int64
	// dg is the digest of the task's key, which Take knows; it spares
	// the ack a record read ("" for a Lease built by hand: the ack reads it).
	dg string
}

func (l Lease) valid() error {
	if l.ID == "" || l.Fence <= 0 {
		return fmt.Errorf("%w: id %q fence %d", ErrInvalidLease, l.ID, l.Fence)
	}
	return nil
}

// Task is one delivery of a task to a consumer.
type Task struct {
	ID      string
	Key     string
	Token   string // the caller's token, or the generated one (= ID)
	Payload []byte
	// Attempt counts deliveries, this one included (1 on the first).
	Attempt int
	// Due is the due time (server clock), Seq its order within the ms.
	Due time.Time
	Seq int64
	// DeliveredAt is Redis TIME when the task was taken.
	DeliveredAt time.Time
	// Deadline is when the lease expires (Redis clock), unless extended.
	Deadline time.Time
	Lease    Lease
	// LastError is the error text of the previous attempt, if any.
	LastError string
}

// Lateness is DeliveredAt minus Due, both by the server clock.
func (t *Task) Lateness() time.Duration { return t.DeliveredAt.Sub(t.Due) }

// Batch is what one Take returned.
type Batch struct {
	Tasks []*Task
	// ServerTime is Redis TIME when the script ran.
	ServerTime time.Time
	// NextDue is the due time of the earliest task still pending (zero if none).
	NextDue time.Time
	// NextExpiry is the earliest lease deadline in flight, or end of a
	// tombstone (Options.DoneTTL), whichever is first: when the next Sweep
	// has work (zero if none).
	NextExpiry time.Time
	// Corrupt counts unreadable records met and parked in the dead set.
	Corrupt int
	// Lost counts due task IDs whose record was gone (ErrRecordLost),
	// moved to the dead set.
	Lost int
}

// Take atomically takes at most n (1..MaxBatch) tasks due by Redis TIME,
// payloads included, moving each to in-flight under a fresh fence and a
// lease of Options.Lease. One round trip. When corrupt records were met, the
// batch still holds the good tasks and the error wraps ErrCorrupt.
func (q *Queue) Take(ctx context.Context, n int) (Batch, error) {
	return q.take(ctx, n, q.req.next())
}

// take is Take as the call req: the Worker sends a take that failed again
// under the same req, so a take that ran but lost its reply hands over
// its tasks instead of leaving them to their leases.
func (q *Queue) take(ctx context.Context, n int, req string) (Batch, error) {
	if n < 1 || n > MaxBatch {
		return Batch{}, fmt.Errorf("%w: %d", ErrInvalidBatch, n)
	}
	sent := q.o.Now()
	r, err := q.mutate(ctx, scriptTake, "take", req,
		[]string{q.k.due, q.k.inflight, q.k.dead, q.k.tasks, q.k.ctr, q.k.stats, q.k.lease, q.k.done},
		n, q.o.Lease.Milliseconds(), q.epoch, q.mult)
	if err != nil {
		return Batch{}, err
	}
	if err := codeErr(r.int(0)); err != nil {
		return Batch{}, fmt.Errorf("delay: take: %w", err)
	}
	nowMs := r.int(1)
	q.observeTime(nowMs, sent, q.o.Now())
	b := Batch{ServerTime: time.UnixMilli(nowMs), Corrupt: int(r.int(4))}
	if v, ok := r.at(4).([]any); ok { // {parked, lost}: see take.lua
		b.Corrupt, b.Lost = int(reply(v).int(0)), int(reply(v).int(1))
	}
	if sc, ok := r.score(2); ok {
		if t, _, err := q.o.Codec.DecodeTime(sc); err == nil {
			b.NextDue = t
		}
	}
	if ms, ok := r.score(3); ok {
		b.NextExpiry = time.UnixMilli(ms)
	}
	deadline := time.UnixMilli(nowMs).Add(q.o.Lease)
	fence := r.int(5) // one fence for the batch: see take.lua
	var bad []error
	var parked []Lease
	for i := 6; i+2 < len(r); i += 3 {
		id := r.str(i)
		sc, ok := r.score(i + 1)
		rec, derr := decodeRecord(r.str(i+2), q.o.MaxPayload)
		var due time.Time
		var seq int64
		var serr error = ErrCorrupt
		if ok {
			due, seq, serr = q.o.Codec.DecodeTime(sc)
		}
		if derr != nil || serr != nil {
			bad = append(bad, fmt.Errorf("%w: task %s: %w", ErrCorrupt, id, errors.Join(derr, serr)))
			parked = append(parked, Lease{ID: id, Fence: fence})
			continue
		}
		t := &Task{
			ID: id, Key: rec.key, Token: rec.token, Payload: rec.payload, Attempt: rec.attempt + 1,
			Due: due, Seq: seq, DeliveredAt: b.ServerTime, Deadline: deadline,
			Lease: Lease{ID: id, Fence: fence, dg: rec.digest}, LastError: rec.err,
		}
		if t.Token == "" {
			t.Token = id
		}
		b.Tasks = append(b.Tasks, t)
		q.o.Observer.OnDelivered(q.name, t.Lateness())
	}
	// What Go cannot read goes to the dead set now, under the lease it was
	// just taken with, rather than cycling through sweeps to MaxAttempts.
	for _, l := range parked {
		if _, err := q.Kill(ctx, l, ErrCorrupt); err == nil {
			b.Corrupt++
		}
	}
	if b.Corrupt > 0 {
		bad = append(bad, fmt.Errorf("%w: %d unreadable records moved to the dead set", ErrCorrupt, b.Corrupt))
	}
	if b.Lost > 0 {
		lerr := fmt.Errorf("%w: %d due task IDs without a record moved to the dead set", ErrRecordLost, b.Lost)
		q.o.Observer.OnLoss(q.name, lerr, b.Lost)
		bad = append(bad, lerr)
	}
	if len(bad) > 0 {
		return b, errors.Join(bad...)
	}
	return b, nil
}

// Ack completes a task: its record and index entry are deleted. A task
// cancelled in flight is deleted the same way.
func (q *Queue) Ack(ctx context.Context, l Lease) error {
	errs, err := q.AckMany(ctx, []Lease{l})
	if err != nil {
		return err
	}
	return errs[0]
}

// AckMany acks up to any number of leases, MaxBatch per script (one round
// trip per MaxBatch). errs[i] is the outcome of leases[i]; err is a
// transport error (then errs is nil).
func (q *Queue) AckMany(ctx context.Context, leases []Lease) (errs []error, err error) {
	return q.ackMany(ctx, leases, q.req.next())
}

// ackMany is AckMany as the call req (the Worker re-sends a failed ack
// batch under the same req: see take).
func (q *Queue) ackMany(ctx context.Context, leases []Lease, req string) (errs []error, err error) {
	errs = make([]error, len(leases))
	chunk := 0
	var args []any
	var idx []int
	flush := func() error {
		if len(idx) == 0 {
			return nil
		}
		var r reply
		var err error
		if q.o.DoneTTL > 0 {
			// ARGV[1] of ack_done.lua is the tombstone lifetime
			r, err = q.mutate(ctx, scriptAckDone, "ack", part(req, chunk),
				[]string{q.k.tasks, q.k.inflight, q.k.idx, q.k.stats, q.k.lease, q.k.done},
				append([]any{q.o.DoneTTL.Milliseconds()}, args...)...)
		} else {
			r, err = q.mutate(ctx, scriptAck, "ack", part(req, chunk), []string{q.k.tasks, q.k.inflight, q.k.idx, q.k.stats, q.k.lease}, args...)
		}
		if err != nil {
			return err
		}
		for k, i := range idx {
			if e := codeErr(r.int(k)); e != nil {
				errs[i] = fmt.Errorf("delay: ack %s: %w", leases[i].ID, e)
			} else {
				q.o.Observer.OnAck(q.name)
			}
		}
		args, idx = args[:0], idx[:0]
		chunk++
		return nil
	}
	for i, l := range leases {
		if e := l.valid(); e != nil {
			errs[i] = e
			continue
		}
		args = append(args, l.ID, strconv.FormatInt(l.Fence, 10), l.dg)
		idx = append(idx, i)
		if len(idx) == MaxBatch {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return errs, nil
}

// Outcome is what Retry or Kill did.
type Outcome int

// Outcomes of Retry and Kill.
const (
	Retried   Outcome = iota + 1 // back in the due set, later
	Dead                         // in the dead-letter set
	Cancelled                    // the task had been cancelled: deleted
)

func (o Outcome) String() string {
	switch o {
	case Retried:
		return "retried"
	case Dead:
		return "dead"
	case Cancelled:
		return "cancelled"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

func errText(cause error) string {
	if cause == nil {
		return ""
	}
	s := cause.Error()
	if len(s) > maxErrText {
		s = s[:maxErrText]
	}
	return s
}

// Retry gives t back with the delay Options.Backoff(t.Attempt), or
// dead-letters it when t.Attempt ≥ MaxAttempts. cause is kept as the last error.
func (q *Queue) Retry(ctx context.Context, t *Task, cause error) (Outcome, error) {
	return q.RetryAfter(ctx, t.Lease, t.Attempt, q.o.Backoff(t.Attempt), cause)
}

// RetryAfter is Retry with an explicit delay; attempt is only reported to the Observer.
func (q *Queue) RetryAfter(ctx context.Context, l Lease, attempt int, delay time.Duration, cause error) (Outcome, error) {
	if err := l.valid(); err != nil {
		return 0, err
	}
	if delay < 0 {
		return 0, fmt.Errorf("%w: %v", ErrNegativeDelay, delay)
	}
	r, err := q.mutate(ctx, scriptRetry, "retry", q.req.next(),
		[]string{q.k.tasks, q.k.inflight, q.k.idx, q.k.due, q.k.dead, q.k.ctr, q.k.stats, q.k.wake, q.k.lease},
		l.ID, strconv.FormatInt(l.Fence, 10), ceilMs(delay), q.o.MaxAttempts, errText(cause),
		q.epoch, q.mult, q.o.Codec.MaxMs())
	if err != nil {
		return 0, err
	}
	switch code := r.int(0); code {
	case codeOK:
		q.o.Observer.OnRetry(q.name, attempt, delay)
		return Retried, nil
	case codeDead:
		q.o.Observer.OnDead(q.name, attempt)
		return Dead, nil
	case codeCancelled:
		return Cancelled, nil
	default:
		return 0, fmt.Errorf("delay: retry %s: %w", l.ID, codeErr(code))
	}
}

// Kill dead-letters a leased task now, keeping cause as its last error.
func (q *Queue) Kill(ctx context.Context, l Lease, cause error) (Outcome, error) {
	if err := l.valid(); err != nil {
		return 0, err
	}
	r, err := q.mutate(ctx, scriptKill, "kill", q.req.next(),
		[]string{q.k.tasks, q.k.inflight, q.k.idx, q.k.dead, q.k.stats, q.k.lease},
		l.ID, strconv.FormatInt(l.Fence, 10), errText(cause))
	if err != nil {
		return 0, err
	}
	switch code := r.int(0); code {
	case codeDead:
		q.o.Observer.OnDead(q.name, 0)
		return Dead, nil
	case codeCancelled:
		return Cancelled, nil
	default:
		return 0, fmt.Errorf("delay: kill %s: %w", l.ID, codeErr(code))
	}
}

// Extend sets the lease deadline to Redis TIME + lease and returns it.
func (q *Queue) Extend(ctx context.Context, l Lease, lease time.Duration) (time.Time, error) {
	if err := l.valid(); err != nil {
		return time.Time{}, err
	}
	if lease < time.Millisecond {
		return time.Time{}, fmt.Errorf("%w: duration %v", ErrInvalidLease, lease)
	}
	r, err := q.mutate(ctx, scriptExtend, "extend", q.req.next(), []string{q.k.tasks, q.k.inflight, q.k.lease},
		l.ID, strconv.FormatInt(l.Fence, 10), ceilMs(lease))
	if err != nil {
		return time.Time{}, err
	}
	if err := codeErr(r.int(0)); err != nil {
		return time.Time{}, fmt.Errorf("delay: extend %s: %w", l.ID, err)
	}
	return time.UnixMilli(r.int(1)), nil
}

// SweepResult counts what a Sweep did.
type SweepResult struct {
	Returned int // expired leases back in the due set (the expired delivery counted as an attempt)
	Dead     int // expired at MaxAttempts: dead-lettered
	Deleted  int // cancelled in flight (or unreadable): removed
	// Tombstones is how many tombstones (Options.DoneTTL) past their end
	// were deleted, at most limit.
	Tombstones int
	// Lost counts expired leases whose record was gone (ErrRecordLost),
	// moved to the dead set and reported to Observer.OnLoss.
	Lost int
}

// Sweep handles at most limit (1..MaxBatch) leases that expired by Redis TIME.
func (q *Queue) Sweep(ctx context.Context, limit int) (SweepResult, error) {
	if limit < 1 || limit > MaxBatch {
		return SweepResult{}, fmt.Errorf("%w: %d", ErrInvalidBatch, limit)
	}
	r, err := q.mutate(ctx, scriptSweep, "sweep", q.req.next(),
		[]string{q.k.inflight, q.k.tasks, q.k.idx, q.k.due, q.k.dead, q.k.ctr, q.k.stats, q.k.wake, q.k.lease, q.k.done},
		limit, q.o.MaxAttempts, q.epoch, q.mult, q.o.Codec.MaxMs())
	if err != nil {
		return SweepResult{}, err
	}
	res := SweepResult{Returned: int(r.int(1)), Dead: int(r.int(2)), Deleted: int(r.int(3)), Tombstones: int(r.int(4)),
		Lost: int(r.int(5))}
	if res.Lost > 0 {
		q.o.Observer.OnLoss(q.name, fmt.Errorf("%w: %d in-flight task IDs without a record moved to the dead set", ErrRecordLost, res.Lost), res.Lost)
	}
	if res.Returned+res.Dead > 0 {
		q.o.Observer.OnSweep(q.name, res.Returned, res.Dead)
	}
	return res, nil
}
