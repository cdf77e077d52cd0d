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

// PageState names the set that ListTasks pages through.
type PageState string

// Page states: the due set split at Redis TIME, and the other sets.
const (
	PageDue       PageState = "due"       // pending and already due
	PageScheduled PageState = "scheduled" // pending, due later
	PageInFlight  PageState = "inflight"  // under a lease (cancelled ones too)
	PageDead      PageState = "dead"      // in the dead-letter set
	PageDone      PageState = "done"      // acked, kept as tombstones (Options.DoneTTL)
)

// PageStates lists the page states in the order a task moves through them.
var PageStates = []PageState{PageDue, PageScheduled, PageInFlight, PageDead, PageDone}

// PageOptions selects one page of ListTasks.
type PageOptions struct {
	// State is the set to page through. Required.
	State PageState
	// Cursor continues after the last page (TaskPage.Next); "" starts at
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
	// set (TaskPage.Bounded says it stopped there). Defaults to 10000.
	ScanLimit int
}

// TaskPage is one page of ListTasks.
type TaskPage struct {
	// Total counts the tasks in the state (before any filter).
	Total int64
	Tasks []TaskEntry
	// Next is the cursor of the next page; "" when the set ends here.
	Next string
	// Scanned is how many entries were read to fill the page.
	Scanned int
	// Bounded: a filter read ScanLimit entries before the page filled;
	// more matches may follow Next.
	Bounded bool
}

// TaskEntry is one task as ListTasks and Task read it.
type TaskEntry struct {
	TaskInfo
	// Fence is the fence of the current delivery of a task in flight
	// (0 otherwise).
	Fence int64
	// Err is set (wrapping ErrCorrupt or ErrRecordLost) when the record
	// does not decode or is gone; ID, State and When are still set.
	Err error
}

// ListTasks reads one page of a state's tasks in score order, from a
// cursor: a ZRANGE BYSCORE window of the page's size and one pipeline of
// record reads, so a page costs O(log N + page) at any depth, never a
// read of the whole set. Filters read further, up to ScanLimit entries.
func (q *Queue) ListTasks(ctx context.Context, o PageOptions) (TaskPage, error) {
	if o.Limit == 0 {
		o.Limit = 50
	}
	if o.Limit < 1 || o.Limit > MaxBatch {
		return TaskPage{}, invalid("batch", "limit %d", o.Limit)
	}
	if o.ScanLimit <= 0 {
		o.ScanLimit = 10_000
	}
	key, lo, hi, err := q.pageRange(o.State)
	if err != nil {
		return TaskPage{}, err
	}
	var p TaskPage
	if p.Total, err = q.c.ZCount(ctx, key, lo, hi).Result(); err != nil {
		return TaskPage{}, wrapErr(ctx, "list tasks", err)
	}
	from, fromID, err := parseCursor(o.Cursor)
	if err != nil {
		return TaskPage{}, err
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
			return TaskPage{}, err
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
		ents, err := q.readEntries(ctx, o.State, kept)
		if err != nil {
			return TaskPage{}, err
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
// TIME, as Stats counts Ready).
func (q *Queue) pageRange(st PageState) (key, lo, hi string, err error) {
	switch st {
	case PageDue, PageScheduled:
		now, err := q.o.Codec.Encode(q.ServerNow().UnixMilli(), q.mult-1)
		if err != nil {
			return "", "", "", err
		}
		if st == PageDue {
			return q.k.due, "-inf", strconv.FormatInt(now, 10), nil
		}
		return q.k.due, "(" + strconv.FormatInt(now, 10), "+inf", nil
	case PageInFlight:
		return q.k.inflight, "-inf", "+inf", nil
	case PageDead:
		return q.k.dead, "-inf", "+inf", nil
	case PageDone:
		return q.k.done, "-inf", "+inf", nil
	}
	return "", "", "", invalid("batch", "state %q (want due, scheduled, inflight, dead or done)", st)
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
func (q *Queue) readEntries(ctx context.Context, st PageState, zs []redis.Z) ([]TaskEntry, error) {
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
		if st == PageInFlight {
			fences = p.HMGet(ctx, q.k.lease, ids...)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, wrapErr(ctx, "list tasks", err)
	}
	out := make([]TaskEntry, len(zs))
	for i, z := range zs {
		var fence any
		if fences != nil {
			fence = fences.Val()[i]
		}
		out[i] = q.entry(ids[i], st, int64(z.Score), recs[i].Val(), fence)
	}
	return out, nil
}

// entry decodes one task's record read beside its score.
func (q *Queue) entry(id string, st PageState, sc int64, blob string, fence any) TaskEntry {
	e := TaskEntry{TaskInfo: TaskInfo{ID: id}}
	switch st {
	case PageDue, PageScheduled:
		e.State = StatePending
		e.When, _, _ = q.o.Codec.DecodeTime(sc)
	case PageInFlight:
		e.State, e.When = StateInFlight, time.UnixMilli(sc)
	case PageDead:
		e.State, e.When = StateDead, time.UnixMilli(sc)
	case PageDone:
		e.State, e.When = StateDone, time.UnixMilli(sc)
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
	if st == PageInFlight {
		e.Attempt++ // the delivery in hand
		if rec.flags&flagCancelled != 0 {
			e.State = StateCancelled
		}
	}
	return e
}

// Task reads one task by ID wherever it is (one pipeline). A task in no
// set is ErrNotFound.
func (q *Queue) Task(ctx context.Context, id string) (TaskEntry, error) {
	if err := checkIDs([]string{id}); err != nil {
		return TaskEntry{}, err
	}
	sets := []struct {
		key string
		st  PageState
	}{{q.k.due, PageDue}, {q.k.inflight, PageInFlight}, {q.k.dead, PageDead}, {q.k.done, PageDone}}
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
		return TaskEntry{}, wrapErr(ctx, "task", err)
	}
	for i, s := range sets {
		if scores[i].Err() != nil {
			continue
		}
		var f any
		if fence.Err() == nil {
			f = fence.Val()
		}
		return q.entry(id, s.st, int64(scores[i].Val()), rec.Val(), f), nil
	}
	return TaskEntry{}, fmt.Errorf("%w: %s", ErrNotFound, id)
}
