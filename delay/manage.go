package delay

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Selector names the tasks Cancel, Reschedule, Requeue or Purge act on:
// every task of a business key (Key), one task (Key and Token), or the
// exact tasks that IDs name when the script runs (IDs, at most MaxBatch).
// Set Key or IDs, not both; All (every dead task) is for Purge alone.
//
// By key, a call finds the tasks through the reverse index, in O(log N)
// per task (no scan). By ID, a call acts only on the tasks the IDs name:
// IDs are never reused, so an ID whose task has finished or been removed
// is skipped (counted nowhere), and a task enqueued since with the same
// key and token, which has a new ID, is never touched, unlike a read of
// the task followed by a call by key and token.
type Selector struct {
	Key string
	// Token narrows Key to the task (Key, Token); "" means every task of Key.
	Token string
	IDs   []string
	// All selects every dead task (Purge only).
	All bool
}

// check validates s for an operation; byKey and all say which forms the
// operation takes (IDs it always takes).
func (s Selector) check(byKey, all bool) error {
	switch {
	case s.All && !all:
		return invalid("selector", "All is for Purge alone")
	case s.All && (s.Key != "" || s.Token != "" || len(s.IDs) > 0):
		return invalid("selector", "All with Key or IDs")
	case s.Key != "" && len(s.IDs) > 0:
		return invalid("selector", "both Key and IDs set")
	case s.Key == "" && s.Token != "":
		return invalid("selector", "Token without Key")
	case s.Key != "" && !byKey:
		return invalid("selector", "by key (this operation takes IDs or All)")
	case s.Key == "" && len(s.IDs) == 0 && !s.All:
		return invalid("selector", "no Key and no IDs")
	case s.Key != "":
		if err := validateKey(s.Key); err != nil {
			return err
		}
		return validateToken(s.Token)
	}
	return checkIDs(s.IDs)
}

// CancelResult reports what Cancel found.
type CancelResult struct {
	Found    int // Pending + InFlight + Dead: the tasks Cancel acted on
	Pending  int // pending tasks removed (record, payload and index entry)
	InFlight int // in-flight tasks marked: their ack removes them, they are never retried
	Dead     int // dead-lettered tasks removed
	Already  int // in-flight tasks that were already marked
}

// Cancel cancels the tasks s names, in one script: a pending or dead task
// is removed, a task in flight is marked (its ack removes it, it is never
// retried). By ID, a dead ID whose record is lost or unreadable is
// removed too, as Purge removes it.
func (q *Queue) Cancel(ctx context.Context, s Selector) (CancelResult, error) {
	if err := s.check(true, false); err != nil {
		return CancelResult{}, err
	}
	var r reply
	var err error
	if s.Key != "" {
		r, err = q.mutate(ctx, scriptCancel, "cancel", q.req.next(),
			[]string{q.k.idx, q.k.tasks, q.k.due, q.k.inflight, q.k.dead, q.k.stats}, s.Key, s.Token, digest(s.Key))
	} else {
		r, err = q.mutate(ctx, scriptCancelIds, "cancel", q.req.next(),
			[]string{q.k.idx, q.k.tasks, q.k.due, q.k.inflight, q.k.dead, q.k.stats}, anys(s.IDs)...)
	}
	if err != nil {
		return CancelResult{}, err
	}
	if err := codeErr(r.int(0)); err != nil {
		return CancelResult{}, fmt.Errorf("delay: cancel: %w", err)
	}
	res := CancelResult{Pending: int(r.int(1)), InFlight: int(r.int(2)), Dead: int(r.int(3)), Already: int(r.int(4))}
	res.Found = res.Pending + res.InFlight + res.Dead
	return res, nil
}

// RescheduleResult reports what Reschedule found.
type RescheduleResult struct {
	Moved    int       // pending tasks given the new due time
	InFlight int       // in-flight tasks, left alone (their handler is running)
	Dead     int       // dead tasks, left alone (see Requeue)
	Due      time.Time // the new due time of the last task moved
}

// Reschedule moves the pending tasks s names to w (O(log N) per task), in
// one script; tasks in flight or dead are counted and left alone. It is
// all or nothing: on an error every task is where and as it was.
func (q *Queue) Reschedule(ctx context.Context, s Selector, w When) (RescheduleResult, error) {
	if err := s.check(true, false); err != nil {
		return RescheduleResult{}, err
	}
	mode, v, err := q.whenArgs(w)
	if err != nil {
		return RescheduleResult{}, err
	}
	if s.Key != "" {
		return q.rescheduled(q.mutate(ctx, scriptReschedule, "reschedule", q.req.next(),
			[]string{q.k.idx, q.k.tasks, q.k.due, q.k.inflight, q.k.dead, q.k.ctr, q.k.stats, q.k.wake},
			s.Key, s.Token, mode, v, q.epoch, q.mult, q.o.Codec.MaxMs(), digest(s.Key)))
	}
	args := append([]any{mode, v, q.epoch, q.mult, q.o.Codec.MaxMs()}, anys(s.IDs)...)
	return q.rescheduled(q.mutate(ctx, scriptRescheduleIds, "reschedule", q.req.next(),
		[]string{q.k.tasks, q.k.due, q.k.inflight, q.k.dead, q.k.ctr, q.k.stats, q.k.wake}, args...))
}

// rescheduled reads the reply of reschedule.lua or reschedule_ids.lua
// (mover's: C_OK, moved, in flight, dead, and the new score or empty).
func (q *Queue) rescheduled(r reply, err error) (RescheduleResult, error) {
	if err != nil {
		return RescheduleResult{}, err
	}
	if err := codeErr(r.int(0)); err != nil {
		return RescheduleResult{}, fmt.Errorf("delay: reschedule: %w", err)
	}
	res := RescheduleResult{Moved: int(r.int(1)), InFlight: int(r.int(2)), Dead: int(r.int(3))}
	if sc, ok := r.score(4); ok {
		res.Due, _, _ = q.o.Codec.DecodeTime(sc)
	}
	return res, nil
}

func anys(ids []string) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// listKey is List by business key: lookup.lua reads the key's tasks
// through the reverse index, in one script, by Redis TIME.
func (q *Queue) listKey(ctx context.Context, o ListOptions) (Page, error) {
	if err := validateKey(o.Key); err != nil {
		return Page{}, err
	}
	if o.Cursor != "" || o.Limit != 0 || o.Newest || !o.From.IsZero() || !o.To.IsZero() {
		return Page{}, invalid("batch", "Cursor, Limit, Newest, From or To with Key (a key's tasks are one page)")
	}
	switch o.State {
	case "", StateDue, StateScheduled, StatePending, StateInFlight, StateCancelled, StateDead, StateDone:
	default:
		return Page{}, invalid("batch", "state %q", o.State)
	}
	r, err := run(ctx, q.c, scriptLookup, "lookup",
		[]string{q.k.idx, q.k.tasks, q.k.due, q.k.inflight, q.k.dead}, o.Key, digest(o.Key))
	if err != nil {
		return Page{}, err
	}
	if err := codeErr(r.int(0)); err != nil {
		return Page{}, fmt.Errorf("delay: lookup: %w", err)
	}
	split, err := q.o.Codec.Encode(r.int(1), q.mult-1)
	if err != nil {
		split = q.dueSplit()
	}
	var p Page
	for i := 2; i+3 < len(r); i += 4 {
		id, st := r.str(i), State(r.str(i+1))
		ti := TaskInfo{ID: id, State: st}
		sc, scored := r.score(i + 2)
		switch {
		case st == StatePending && scored:
			ti.State = pendingState(sc, split)
			ti.When, _, _ = q.o.Codec.DecodeTime(sc)
		case scored:
			ti.When = time.UnixMilli(sc)
		}
		if st == "unknown" {
			// a record in no set: Redis lost its due entry
			ti.State, ti.Err = "", fmt.Errorf("%w: task %s", ErrDueLost, id)
		}
		if rec, err := decodeRecord(r.str(i+3), q.o.MaxPayload); err != nil {
			ti.Err = fmt.Errorf("delay: lookup %s: %w", id, err)
		} else {
			ti.Key, ti.Token, ti.Attempt, ti.LastError, ti.LastErrors, ti.Payload = rec.key, rec.token, rec.attempt, rec.err, rec.errs, rec.payload
			if ti.Token == "" {
				ti.Token = id
			}
			if st == StateInFlight || st == StateCancelled {
				ti.Attempt++ // the record counts finished deliveries
			}
		}
		if !o.inState(ti) {
			continue
		}
		p.Total++ // in the state, before KeyPrefix and ErrorText, as by State
		if !strings.HasPrefix(ti.Key, o.KeyPrefix) || !strings.Contains(ti.LastError, o.ErrorText) {
			continue
		}
		p.Scanned++
		p.Tasks = append(p.Tasks, ti)
	}
	return p, nil
}

// inState applies List's State to one task read by key.
func (o ListOptions) inState(t TaskInfo) bool {
	switch o.State {
	case "":
	case StatePending:
		if t.State != StateDue && t.State != StateScheduled {
			return false
		}
	case StateInFlight:
		if t.State != StateInFlight && t.State != StateCancelled {
			return false
		}
	default:
		if t.State != o.State {
			return false
		}
	}
	return true
}

func checkIDs(ids []string) error {
	if len(ids) > MaxBatch {
		return invalid("batch", "%d IDs", len(ids))
	}
	for _, id := range ids {
		if !wellFormedID(id) {
			// Malformed, not merely gone: an ID that names no task is
			// skipped, but one no task could have is the caller's mistake.
			return invalid("selector", "task ID %q (want 1..32 bytes, as Enqueued.ID)", id)
		}
	}
	return nil
}

// wellFormedID reports whether id could name a task.
func wellFormedID(id string) bool { return id != "" && len(id) <= 32 }

// Requeue moves the dead tasks s names by IDs back to due now, with
// their attempt count reset (the last error is kept). It returns how many
// were requeued. It is all or nothing: on an error (ErrSeqExhausted,
// score.ErrOutOfRange) every task is still dead, as it was.
func (q *Queue) Requeue(ctx context.Context, s Selector) (int, error) {
	if err := s.check(false, false); err != nil {
		return 0, err
	}
	args := []any{q.epoch, q.mult, q.o.Codec.MaxMs()}
	args = append(args, anys(s.IDs)...)
	r, err := q.mutate(ctx, scriptRequeue, "requeue", q.req.next(),
		[]string{q.k.dead, q.k.tasks, q.k.due, q.k.ctr, q.k.stats, q.k.wake}, args...)
	if err != nil {
		return 0, err
	}
	if err := codeErr(r.int(0)); err != nil {
		return 0, fmt.Errorf("delay: requeue: %w", err) // nothing was moved
	}
	return int(r.int(1)), nil
}

// Purge deletes the dead tasks s names (by IDs, or All: the whole
// dead-letter set, MaxBatch tasks per script) with their records and
// index entries. It returns how many were deleted.
func (q *Queue) Purge(ctx context.Context, s Selector) (int, error) {
	if err := s.check(false, true); err != nil {
		return 0, err
	}
	if !s.All {
		return q.purge(ctx, 0, s.IDs)
	}
	total := 0
	for {
		n, err := q.purge(ctx, MaxBatch, nil)
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
}

func (q *Queue) purge(ctx context.Context, oldest int, ids []string) (int, error) {
	args := []any{oldest}
	for _, id := range ids {
		args = append(args, id)
	}
	r, err := q.mutate(ctx, scriptPurge, "purge", q.req.next(), []string{q.k.dead, q.k.tasks, q.k.idx}, args...)
	if err != nil {
		return 0, err
	}
	return int(r.int(1)), nil
}

// Stats is a snapshot of one queue, taken by Redis TIME in one script.
type Stats struct {
	ServerTime time.Time
	Pending    int64 // in the due set (ready or not)
	Ready      int64 // pending and already due
	InFlight   int64
	Dead       int64 // in the dead-letter set now
	Done       int64 // tombstones kept (Options.DoneTTL)
	// OldestDueAge is how long the earliest ready task has been due (0 if none).
	OldestDueAge time.Duration
	// Counters since the queue's keys were created.
	Delivered, Acked, Retries, DeadLettered, Expired, Cancelled, SeqOverflows, Corrupt int64
	// Losses Redis caused and the queue met (see Observer.OnLoss): task
	// IDs due or in flight without a record, moved to dead (Lost); records
	// in no set put back in due by a new enqueue of their (Key, Token)
	// (Restored); ID counters and indexes repaired (CounterLost, IndexLost).
	Lost, Restored, CounterLost, IndexLost int64
	// Lateness counts deliveries by lateness (Redis TIME at take minus the
	// due time, both by the server's clock), in power-of-two buckets.
	Lateness LatenessBuckets
	// Paused: no worker takes from the queue (Queue.Pause) since
	// PausedSince (Redis clock).
	Paused      bool
	PausedSince time.Time
	// Rate is the queue's rate limit (Queue.SetRate); zero when none.
	Rate Rate
	// HighWater is the most seqs of one millisecond in use that an enqueue
	// met over the last one to two minutes (Redis TIME), of HighWaterSpace
	// (2^bits, the score codec's): a task that spilled to the next
	// millisecond counts the whole space. Retries, sweeps and reschedules
	// also take seqs but are not counted.
	HighWater, HighWaterSpace int64
}

// LatenessBuckets is a server-side lateness histogram: Counts[0] is 0 ms
// late, Counts[b] for b ≥ 1 covers [2^(b-1), 2^b) ms. The take script
// keeps it, so it covers every worker of the queue, not just one process.
// Stats fills the summary fields from the counts.
type LatenessBuckets struct {
	Counts [41]int64
	// Total is the number of deliveries counted.
	Total int64
	// P50, P99 and P999 are upper bounds of those percentiles, and Max of
	// the largest lateness: the exclusive top of the bucket holding each,
	// so 1ms means "on time, to the millisecond". All 0 when Total is 0.
	P50, P99, P999, Max time.Duration
}

// summarize sets the fields computed from Counts.
func (l *LatenessBuckets) summarize() {
	l.Total = 0
	for _, c := range l.Counts {
		l.Total += c
	}
	l.P50, l.P99, l.P999, l.Max = l.percentile(50), l.percentile(99), l.percentile(99.9), l.percentile(100)
}

// percentile returns an upper bound of the p-th percentile (0 < p ≤ 100)
// of Counts: the exclusive top of the bucket holding it; 0 when nothing
// was counted.
func (l LatenessBuckets) percentile(p float64) time.Duration {
	var total int64
	for _, c := range l.Counts {
		total += c
	}
	if total == 0 {
		return 0
	}
	rank := int64(math.Ceil(p / 100 * float64(total)))
	rank = max(rank, 1)
	var seen int64
	for b, c := range l.Counts {
		seen += c
		if seen >= rank {
			// Bucket b ends at 2^b ms; bucket 0 (0 ms late) ends at 1 ms.
			return time.Duration(int64(1)<<b) * time.Millisecond
		}
	}
	return time.Duration(int64(1)<<(len(l.Counts)-1)) * time.Millisecond
}

// Stats reads depths per state, the oldest-due age and the counters.
func (q *Queue) Stats(ctx context.Context) (Stats, error) {
	sent := q.o.Now()
	r, err := run(ctx, q.c, scriptStats, "stats",
		[]string{q.k.due, q.k.inflight, q.k.dead, q.k.stats, q.k.done, q.k.ctl, q.k.ctr}, q.epoch, q.mult)
	if err != nil {
		return Stats{}, err
	}
	q.observeTime(r.int(1), sent, q.o.Now())
	s := Stats{ServerTime: time.UnixMilli(r.int(1)), Pending: r.int(2), Ready: r.int(3),
		InFlight: r.int(4), Dead: r.int(5)}
	if sc, ok := r.score(6); ok {
		if due, _, err := q.o.Codec.DecodeTime(sc); err == nil && due.Before(s.ServerTime) {
			s.OldestDueAge = s.ServerTime.Sub(due)
		}
	}
	s.Done = r.int(7)
	s.HighWaterSpace = q.mult
	for i := 8; i+1 < len(r); i += 2 {
		v := r.int(i + 1)
		switch r.str(i) {
		case "ctl:paused":
			s.Paused, s.PausedSince = true, time.UnixMilli(v)
		case "ctl:rate":
			s.Rate.PerSecond, _ = strconv.ParseFloat(r.str(i+1), 64)
		case "ctl:burst":
			s.Rate.Burst = int(v)
		case "ctr:hw":
			s.HighWater = v
		case "delivered":
			s.Delivered = v
		case "acked":
			s.Acked = v
		case "retries":
			s.Retries = v
		case "dead":
			s.DeadLettered = v
		case "expired":
			s.Expired = v
		case "cancelled":
			s.Cancelled = v
		case "overflow":
			s.SeqOverflows = v
		case "corrupt":
			s.Corrupt = v
		case "lost":
			s.Lost = v
		case "restored":
			s.Restored = v
		case "ctr_lost":
			s.CounterLost = v
		case "idx_lost":
			s.IndexLost = v
		default:
			if b, ok := strings.CutPrefix(r.str(i), "lat:"); ok {
				if n, err := strconv.Atoi(b); err == nil && n >= 0 && n < len(s.Lateness.Counts) {
					s.Lateness.Counts[n] = v
				}
			}
		}
	}
	s.Lateness.summarize()
	return s, nil
}
