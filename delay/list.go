package delay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ListOptions selects one page of List.
type ListOptions struct {
	// State is the set to page through: StateDue (pending and due by
	// Redis TIME, soonest first), StateScheduled (pending, due later),
	// StatePending (both), StateInFlight (cancelled ones too, oldest lease
	// first), StateDead or StateDone. Required unless Key is set.
	State State
	// Key lists the tasks of one business key (at most 64), through the
	// reverse index in one script: every state unless State is set (a
	// pending task matches StatePending, and StateDue or StateScheduled by
	// its due time). The page is then the whole list: Cursor, Limit,
	// Newest, From and To set with Key are refused.
	Key string
	// From and To bound the score time: the due time (pending), the lease
	// deadline (in flight), the dead-letter time (dead) or the ack time
	// (done); both inclusive, zero for no bound. Total counts the tasks in
	// the bounds.
	From, To time.Time
	// Cursor continues after the last page (Page.Next); "" starts at
	// the first task.
	Cursor string
	// Limit is the most tasks on the page (1..MaxBatch). Defaults to 50.
	Limit int
	// Newest pages from the highest score down (the latest due time, lease
	// or death first). Defaults to false: oldest first.
	Newest bool
	// KeyPrefix keeps only the tasks whose business key starts with it.
	KeyPrefix string
	// ErrorText keeps only the tasks whose last error contains it.
	ErrorText string
	// ScanLimit bounds the entries one call reads when a filter is set, so
	// a filter that matches nothing costs a bounded window, not the whole
	// set (Page.Bounded says it stopped there). Defaults to 10000.
	ScanLimit int
}

// Page is one page of List.
type Page struct {
	// Total counts the tasks in the state and bounds (before KeyPrefix and
	// ErrorText).
	Total int64
	Tasks []TaskInfo
	// Next is the cursor of the next page; "" when the set ends here.
	Next string
	// Scanned is how many entries were read to fill the page.
	Scanned int
	// Bounded: a filter read ScanLimit entries before the page filled;
	// more matches may follow Next.
	Bounded bool
}

// TaskInfo is one task as List and Task read it, beside the delivered
// *Task a handler gets.
type TaskInfo struct {
	ID, Key, Token string
	// State is StateDue or StateScheduled (by Redis TIME as the read
	// estimates it) for a pending task, else where the task is.
	State State
	// Attempt counts deliveries so far: the one in hand included for a
	// task in flight.
	Attempt int
	// When is the due time (pending), the lease deadline (in flight or
	// cancelled), the dead-letter time (dead) or the ack time (done).
	When time.Time
	// LastError is the newest of LastErrors ("" when none).
	LastError string
	// LastErrors are the task's last errors, oldest first: up to 3, the
	// oldest dropped when they pass 2 KiB together (the newest is always
	// kept). Each retry, kill or expired lease adds one; a retry or kill
	// with a nil cause adds "". A record written before lists were kept
	// has its one error here.
	LastErrors []string
	Payload    []byte
	// Fence is the fence of the current delivery of a task in flight
	// (0 otherwise).
	Fence int64
	// Err is set (wrapping ErrCorrupt, ErrRecordLost or ErrDueLost) when
	// the record does not decode, is gone, or is in no set; ID, State and
	// When are set as far as they are known. Purge still removes a dead
	// one.
	Err error
}

// List reads one page of tasks. By State, in score order from a cursor:
// a ZRANGE BYSCORE window of the page's size and one pipeline of record
// reads, so a page costs O(log N + page) at any depth, never a read of
// the whole set; filters read further, up to ScanLimit entries. By Key,
// the key's tasks in one script.
func (q *Queue) List(ctx context.Context, o ListOptions) (Page, error) {
	if o.Key != "" {
		return q.listKey(ctx, o)
	}
	if o.Limit == 0 {
		o.Limit = 50
	}
	if o.Limit < 1 || o.Limit > MaxBatch {
		return Page{}, invalid("batch", "limit %d", o.Limit)
	}
	if o.ScanLimit < 0 {
		return Page{}, invalid("batch", "scan limit %d (want 0 for the default, or more)", o.ScanLimit)
	}
	if o.ScanLimit == 0 {
		o.ScanLimit = 10_000
	}
	key, lo, hi, err := q.pageRange(o.State, o.From, o.To)
	if err != nil {
		return Page{}, err
	}
	var p Page
	if p.Total, err = q.c.ZCount(ctx, key, lo, hi).Result(); err != nil {
		return Page{}, wrapErr(ctx, "list tasks", err)
	}
	from, fromID, err := parseCursor(o.Cursor)
	if err != nil {
		return Page{}, err
	}
	filtered := o.KeyPrefix != "" || o.ErrorText != ""
	last := ""          // the cursor of the last task on the page
	grow := o.Limit + 1 // a filter's window: a page's worth first, doubling to 500
	for off := 0; ; {
		chunk := o.Limit + 1 - len(p.Tasks)
		if filtered {
			chunk = min(grow, o.ScanLimit-p.Scanned)
			grow = min(2*grow, 500)
		}
		zs, err := q.zwindow(ctx, key, lo, hi, from, o.Newest, off, chunk)
		if err != nil {
			return Page{}, err
		}
		// Entries tied with the cursor's score at or before its ID were
		// on the last page (Redis orders ties by member).
		kept := zs[:0]
		for _, z := range zs {
			id := z.Member.(string)
			if o.Cursor != "" && z.Score == from && (!o.Newest && id <= fromID || o.Newest && id >= fromID) {
				off++
				continue
			}
			kept = append(kept, z)
		}
		if len(kept) == 0 && len(zs) == chunk {
			continue // a run of ties: read past it
		}
		ents, err := q.readEntries(ctx, o.State, q.dueSplit(), kept)
		if err != nil {
			return Page{}, err
		}
		for i, e := range ents {
			if !filtered && len(p.Tasks) == o.Limit {
				p.Next = last
				return p, nil
			}
			p.Scanned++
			if e.Err == nil && (!strings.HasPrefix(e.Key, o.KeyPrefix) || !strings.Contains(e.LastError, o.ErrorText)) {
				continue
			}
			if filtered && e.Err != nil {
				continue
			}
			p.Tasks, last = append(p.Tasks, e), cursorOf(kept[i])
			if filtered && len(p.Tasks) == o.Limit {
				p.Next = last
				return p, nil
			}
		}
		if len(zs) < chunk {
			return p, nil // the set ends here
		}
		if filtered && p.Scanned >= o.ScanLimit {
			p.Bounded, p.Next = true, cursorOf(kept[len(kept)-1])
			return p, nil
		}
		from, fromID, o.Cursor, off = kept[len(kept)-1].Score, kept[len(kept)-1].Member.(string), "next", 0
	}
}

// pageRange is the state's sorted set and its score bounds: the due set
// splits at the current millisecond's last seq (by the estimated Redis
// TIME, as Stats counts Ready); from and to narrow them.
func (q *Queue) pageRange(st State, from, to time.Time) (key, lo, hi string, err error) {
	lo, hi = "-inf", "+inf"
	switch st {
	case StateDue, StateScheduled, StatePending:
		key = q.k.due
		split := strconv.FormatInt(q.dueSplit(), 10)
		if st == StateDue {
			hi = split
		} else if st == StateScheduled {
			lo = "(" + split
		}
		// A bound past the codec's range holds no pending task: From there
		// selects none, To there bounds nothing.
		last := q.o.Codec.MaxTime()
		if from.After(last) {
			lo = "+inf"
		} else if !from.IsZero() {
			f, err := q.o.Codec.Encode(max(ceilUnixMs(from), q.epoch), 0)
			if err != nil {
				return "", "", "", err
			}
			lo = maxBound(lo, strconv.FormatInt(f, 10))
		}
		if !to.IsZero() && !to.After(last) {
			t, err := q.o.Codec.Encode(max(to.UnixMilli(), q.epoch), q.mult-1)
			if err != nil {
				return "", "", "", err
			}
			hi = minBound(hi, strconv.FormatInt(t, 10))
		}
		return key, lo, hi, nil
	case StateInFlight:
		key = q.k.inflight
	case StateDead:
		key = q.k.dead
	case StateDone:
		key = q.k.done
	default:
		return "", "", "", invalid("batch", "state %q (want due, scheduled, pending, inflight, dead or done)", st)
	}
	if !from.IsZero() {
		lo = strconv.FormatInt(ceilUnixMs(from), 10)
	}
	if !to.IsZero() {
		hi = strconv.FormatInt(to.UnixMilli(), 10)
	}
	return key, lo, hi, nil
}

// dueSplit is the highest due-set score that is due now: the current
// millisecond's last seq, by the estimated Redis TIME.
func (q *Queue) dueSplit() int64 {
	now, err := q.o.Codec.Encode(q.ServerNow().UnixMilli(), q.mult-1)
	if err != nil {
		return math.MaxInt64 // past the codec's range: everything is due
	}
	return now
}

// pendingState is StateDue or StateScheduled for a due-set score, split at
// split (a dueSplit).
func pendingState(sc, split int64) State {
	if sc <= split {
		return StateDue
	}
	return StateScheduled
}

// zwindow reads count entries from score from (inclusive; the bound when
// this is the first page) in the page's direction, skipping off.
func (q *Queue) zwindow(ctx context.Context, key, lo, hi string, from float64, newest bool, off, count int) ([]redis.Z, error) {
	start, stop := lo, hi
	if !isNaN(from) {
		f := strconv.FormatFloat(from, 'f', -1, 64)
		if newest {
			stop = minBound(hi, f)
		} else {
			start = maxBound(lo, f)
		}
	}
	by := redis.ZRangeArgs{Key: key, Start: start, Stop: stop, ByScore: true, Offset: int64(off), Count: int64(count)}
	if newest {
		by.Start, by.Stop, by.Rev = stop, start, true
	}
	zs, err := q.c.ZRangeArgsWithScores(ctx, by).Result()
	if err != nil {
		return nil, wrapErr(ctx, "list tasks", err)
	}
	return zs, nil
}

func isNaN(f float64) bool { return math.IsNaN(f) }

// maxBound is the later of a range's low bound and a cursor score; the
// cursor's is inclusive (ties are filtered by ID).
func maxBound(lo, f string) string {
	if lo == "-inf" {
		return f
	}
	a, _ := strconv.ParseFloat(strings.TrimPrefix(lo, "("), 64)
	b, _ := strconv.ParseFloat(f, 64)
	if a >= b {
		return lo
	}
	return f
}

func minBound(hi, f string) string {
	if hi == "+inf" {
		return f
	}
	a, _ := strconv.ParseFloat(strings.TrimPrefix(hi, "("), 64)
	b, _ := strconv.ParseFloat(f, 64)
	if a <= b {
		return hi
	}
	return f
}

func cursorOf(z redis.Z) string {
	return strconv.FormatFloat(z.Score, 'f', -1, 64) + ":" + z.Member.(string)
}

// parseCursor reads "score:id"; "" is NaN (the first page).
func parseCursor(c string) (float64, string, error) {
	if c == "" {
		return math.NaN(), "", nil
	}
	s, id, ok := strings.Cut(c, ":")
	f, err := strconv.ParseFloat(s, 64)
	if !ok || err != nil || id == "" || isNaN(f) {
		return 0, "", invalid("batch", "cursor %q", c)
	}
	return f, id, nil
}

// readEntries reads the records of a window's tasks (and the fences of
// tasks in flight) in one pipeline.
func (q *Queue) readEntries(ctx context.Context, st State, split int64, zs []redis.Z) ([]TaskInfo, error) {
	if len(zs) == 0 {
		return nil, nil
	}
	recs := make([]*redis.StringCmd, len(zs))
	var fences *redis.SliceCmd
	ids := make([]string, len(zs))
	_, err := q.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, z := range zs {
			ids[i] = z.Member.(string)
			recs[i] = p.HGet(ctx, q.k.taskBucket(ids[i]), ids[i])
		}
		if st == StateInFlight {
			fences = p.HMGet(ctx, q.k.lease, ids...)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, wrapErr(ctx, "list tasks", err)
	}
	out := make([]TaskInfo, len(zs))
	for i, z := range zs {
		var fence any
		if fences != nil {
			fence = fences.Val()[i]
		}
		out[i] = q.entry(ids[i], st, split, int64(z.Score), recs[i].Val(), fence)
	}
	return out, nil
}

// entry decodes one task's record read beside its score in the set of
// state st (any of the due set's three for a pending task).
func (q *Queue) entry(id string, st State, split, sc int64, blob string, fence any) TaskInfo {
	e := TaskInfo{ID: id}
	switch st {
	case StateDue, StateScheduled, StatePending:
		e.State = pendingState(sc, split)
		e.When, _, _ = q.o.Codec.DecodeTime(sc)
	default:
		e.State, e.When = st, time.UnixMilli(sc)
	}
	if s, ok := fence.(string); ok {
		e.Fence, _ = strconv.ParseInt(s, 10, 64)
	}
	if blob == "" {
		e.Err = fmt.Errorf("%w: task %s", ErrRecordLost, id)
		return e
	}
	rec, err := decodeRecord(blob, q.o.MaxPayload)
	if err != nil {
		e.Err = err
		return e
	}
	e.Key, e.Token, e.Attempt, e.LastError, e.LastErrors, e.Payload = rec.key, rec.token, rec.attempt, rec.err, rec.errs, rec.payload
	if e.Token == "" {
		e.Token = id
	}
	if st == StateInFlight {
		e.Attempt++ // the delivery in hand
		if rec.flags&flagCancelled != 0 {
			e.State = StateCancelled
		}
	}
	return e
}

// Task reads one task by ID wherever it is (one pipeline). A task in no
// set is ErrNotFound.
func (q *Queue) Task(ctx context.Context, id string) (TaskInfo, error) {
	if !wellFormedID(id) {
		return TaskInfo{}, fmt.Errorf("%w: task ID %q", ErrNotFound, id)
	}
	sets := []struct {
		key string
		st  State
	}{{q.k.due, StatePending}, {q.k.inflight, StateInFlight}, {q.k.dead, StateDead}, {q.k.done, StateDone}}
	scores := make([]*redis.FloatCmd, len(sets))
	var rec, fence *redis.StringCmd
	_, err := q.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, s := range sets {
			scores[i] = p.ZScore(ctx, s.key, id)
		}
		rec = p.HGet(ctx, q.k.taskBucket(id), id)
		fence = p.HGet(ctx, q.k.lease, id)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return TaskInfo{}, wrapErr(ctx, "task", err)
	}
	for i, s := range sets {
		if scores[i].Err() != nil {
			continue
		}
		var f any
		if fence.Err() == nil {
			f = fence.Val()
		}
		return q.entry(id, s.st, q.dueSplit(), int64(scores[i].Val()), rec.Val(), f), nil
	}
	return TaskInfo{}, fmt.Errorf("%w: %s", ErrNotFound, id)
}
