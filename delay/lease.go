package delay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// leaseRef identifies one delivery of a task: its ID and fencing token.
// ackTask, retry, killTask and extend take the *Task and succeed only with
// its current lease.
type leaseRef struct {
	ID    string
	Fence int64
	// dg is the digest of the task's key, which Take knows; it spares
	// the ack a record read ("" for a lease built by hand: the ack reads it).
	dg string
}

// leaseOf returns t's lease, or the *ValidationError for a nil task or
// an empty lease.
func leaseOf(t *Task) (leaseRef, error) {
	if t == nil {
		return leaseRef{}, invalid("task", "nil task")
	}
	return t.lease, t.lease.valid()
}

func (l leaseRef) valid() error {
	if l.ID == "" || l.Fence <= 0 {
		return invalid("lease", "id %q fence %d", l.ID, l.Fence)
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
	// Fence is the delivery's fencing token: every take of the queue
	// draws a higher one, so a write a handler makes elsewhere under
	// Fence can be refused once a later delivery of the task has written
	// under a higher one (the earlier one having lost its lease).
	Fence int64
	lease leaseRef
	// LastError is the error text of the previous attempt, if any.
	LastError string
}

// Lateness is DeliveredAt minus Due, both by the server clock.
func (t *Task) Lateness() time.Duration { return t.DeliveredAt.Sub(t.Due) }

// takeBatch is what one Take returned.
type takeBatch struct {
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
	// Paused: the queue is paused (Queue.Pause) and the take took nothing.
	// PausedSince is when the pause began (Redis clock). A taker should
	// idle (wait for the wake list, which Resume pushes, or poll slowly):
	// NextDue may be long past. NextExpiry still tells when a sweep is
	// due, and the sweep still returns expired leases to due.
	Paused      bool
	PausedSince time.Time
	// NextToken is, under a rate limit (Queue.SetRate), when the next task
	// may be taken (Redis clock): set when the take left less than one
	// whole token, so a taker waits until then instead of asking again.
	// Zero when no limit is set or a token is left.
	NextToken time.Time
}

// takeN atomically takes at most n (1..MaxBatch) tasks due by Redis TIME,
// payloads included, moving each to in-flight under a fresh fence and a
// lease of Options.Lease. One round trip. When corrupt records were met, the
// batch still holds the good tasks and the error wraps ErrCorrupt.
func (q *Queue) takeN(ctx context.Context, n int) (takeBatch, error) {
	return q.take(ctx, n, q.req.next())
}

// take is Take as the call req: the Worker sends a take that failed again
// under the same req, so a take that ran but lost its reply hands over
// its tasks instead of leaving them to their leases.
func (q *Queue) take(ctx context.Context, n int, req string) (takeBatch, error) {
	if n < 1 || n > MaxBatch {
		return takeBatch{}, invalid("batch", "%d", n)
	}
	sent := q.o.Now()
	r, err := q.mutate(ctx, scriptTake, "take", req,
		[]string{q.k.due, q.k.inflight, q.k.dead, q.k.tasks, q.k.ctr, q.k.stats, q.k.lease, q.k.done, q.k.ctl},
		n, q.o.Lease.Milliseconds(), q.epoch, q.mult)
	if err != nil {
		return takeBatch{}, err
	}
	code := r.int(0)
	if err := codeErr(code); err != nil {
		return takeBatch{}, fmt.Errorf("delay: take: %w", err)
	}
	nowMs := r.int(1)
	q.observeTime(nowMs, sent, q.o.Now())
	b := takeBatch{ServerTime: time.UnixMilli(nowMs), Corrupt: int(r.int(4))}
	// gate (see take.lua): the pause's start, or when the next token comes
	if ms, ok := r.score(6); ok {
		if code == codePaused {
			b.Paused, b.PausedSince = true, time.UnixMilli(ms)
		} else {
			b.NextToken = time.UnixMilli(tokenTime(nowMs, ms))
		}
	}
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
	var parked []leaseRef
	for i := 7; i+2 < len(r); i += 3 {
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
			parked = append(parked, leaseRef{ID: id, Fence: fence})
			continue
		}
		t := &Task{
			ID: id, Key: rec.key, Token: rec.token, Payload: rec.payload, Attempt: rec.attempt + 1,
			Due: due, Seq: seq, DeliveredAt: b.ServerTime, Deadline: deadline,
			Fence: fence, lease: leaseRef{ID: id, Fence: fence, dg: rec.digest}, LastError: rec.err,
		}
		if t.Token == "" {
			t.Token = id
		}
		b.Tasks = append(b.Tasks, t)
		q.o.obs.OnDelivered(q.name, t.Lateness())
	}
	// What Go cannot read goes to the dead set now, under the lease it was
	// just taken with, rather than cycling through sweeps to MaxAttempts.
	for _, l := range parked {
		if _, err := q.kill(ctx, l, ErrCorrupt); err == nil {
			b.Corrupt++
		}
	}
	if b.Corrupt > 0 {
		bad = append(bad, fmt.Errorf("%w: %d unreadable records moved to the dead set", ErrCorrupt, b.Corrupt))
	}
	if b.Lost > 0 {
		lerr := fmt.Errorf("%w: %d due task IDs without a record moved to the dead set", ErrRecordLost, b.Lost)
		q.o.obs.OnLoss(q.name, lerr, b.Lost)
		bad = append(bad, lerr)
	}
	if len(bad) > 0 {
		return b, errors.Join(bad...)
	}
	return b, nil
}

// ackTask completes a task: its record and index entry are deleted. A task
// cancelled in flight is deleted the same way.
func (q *Queue) ackTask(ctx context.Context, t *Task) error {
	errs, err := q.ackTasks(ctx, []*Task{t})
	if err != nil {
		return err
	}
	return errs[0]
}

// ackTasks acks any number of tasks, MaxBatch per script (one round trip
// per MaxBatch). errs[i] is the outcome of tasks[i]; err is a transport
// error (then errs is nil).
func (q *Queue) ackTasks(ctx context.Context, tasks []*Task) (errs []error, err error) {
	leases := make([]leaseRef, len(tasks))
	for i, t := range tasks {
		if t != nil {
			leases[i] = t.lease
		}
	}
	errs, err = q.ackMany(ctx, leases, q.req.next())
	for i, t := range tasks {
		if t == nil && errs != nil {
			_, errs[i] = leaseOf(t)
		}
	}
	return errs, err
}

// ackMany is AckMany as the call req (the Worker re-sends a failed ack
// batch under the same req: see take).
func (q *Queue) ackMany(ctx context.Context, leases []leaseRef, req string) (errs []error, err error) {
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
				q.o.obs.OnAck(q.name)
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

// outcome is what retry or killTask did.
type outcome int

// Outcomes of retry and killTask.
const (
	outcomeRetried   outcome = iota + 1 // back in the due set, later
	outcomeDead                         // in the dead-letter set
	outcomeCancelled                    // the task had been cancelled: deleted
)

func (o outcome) String() string {
	switch o {
	case outcomeRetried:
		return "retried"
	case outcomeDead:
		return "dead"
	case outcomeCancelled:
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

// retry gives t back with the delay Options.Backoff(t.Attempt), or
// dead-letters it when t.Attempt ≥ MaxAttempts. cause is kept as the last error.
func (q *Queue) retry(ctx context.Context, t *Task, cause error) (outcome, error) {
	if t == nil {
		return 0, invalid("task", "nil task")
	}
	return q.retryAfter(ctx, t, q.o.Backoff(t.Attempt), cause)
}

// retryAfter is retry with an explicit delay.
func (q *Queue) retryAfter(ctx context.Context, t *Task, delay time.Duration, cause error) (outcome, error) {
	l, err := leaseOf(t)
	if err != nil {
		return 0, err
	}
	attempt := t.Attempt // only reported to the Observer
	if delay < 0 {
		return 0, invalid("delay", "%v", delay)
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
		q.o.obs.OnRetry(q.name, attempt, delay)
		return outcomeRetried, nil
	case codeDead:
		q.o.obs.OnDead(q.name, attempt)
		return outcomeDead, nil
	case codeCancelled:
		return outcomeCancelled, nil
	default:
		return 0, fmt.Errorf("delay: retry %s: %w", l.ID, codeErr(code))
	}
}

// killTask dead-letters a leased task now, keeping cause as its last error.
func (q *Queue) killTask(ctx context.Context, t *Task, cause error) (outcome, error) {
	l, err := leaseOf(t)
	if err != nil {
		return 0, err
	}
	return q.kill(ctx, l, cause)
}

// kill is Kill by lease: Take parks an unreadable record, which has no
// Task, under the lease it was just taken with.
func (q *Queue) kill(ctx context.Context, l leaseRef, cause error) (outcome, error) {
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
		q.o.obs.OnDead(q.name, 0)
		return outcomeDead, nil
	case codeCancelled:
		return outcomeCancelled, nil
	default:
		return 0, fmt.Errorf("delay: kill %s: %w", l.ID, codeErr(code))
	}
}

// extend sets the lease deadline to Redis TIME + lease and returns it.
func (q *Queue) extend(ctx context.Context, t *Task, lease time.Duration) (time.Time, error) {
	l, err := leaseOf(t)
	if err != nil {
		return time.Time{}, err
	}
	if lease < time.Millisecond {
		return time.Time{}, invalid("lease", "duration %v", lease)
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

// keepAlive extends t's lease to Options.Lease every interval (0 = Lease/3)
// until stop is called or ctx ends. stop returns the first extension error
// (ErrLeaseLost if the lease was lost, after which it stops extending).
func (q *Queue) keepAlive(ctx context.Context, t *Task, interval time.Duration) (stop func() error) {
	if interval <= 0 {
		interval = q.o.Lease / 3
	}
	ctx, cancel := context.WithCancel(ctx)
	var (
		mu       sync.Mutex
		firstErr error
		done     = make(chan struct{})
	)
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			_, err := q.extend(ctx, t, q.o.Lease)
			if err != nil && ctx.Err() == nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				if errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrNotFound) {
					return
				}
			}
		}
	}()
	return func() error {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return firstErr
	}
}
