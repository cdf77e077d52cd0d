package delay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// History keeps, per queue, what its workers did each minute of the last
// 24 hours: tasks handled ok, retried and dead-lettered by a handler, and
// their lateness. Workers count in memory and add their counts to one
// hash per queue (keys.hist) at most once a second per queue they take
// from, so the cost per task is a few memory increments; Redis sees one
// pipeline of HINCRBYs per second per taker, whatever the task rate.
//
// The hash has historySlots slots, one per minute of the day (minute
// number mod historySlots). Field "<slot>:m" holds the minute number (Unix
// minutes, Redis clock) the slot counts; a writer that finds an older
// minute there clears the slot under WATCH before adding to it, so a slot
// is reused a day later and the hash never grows past historySlots slots.
// The key expires historyTTL after the last write: an idle queue's history
// ends with its data.
const (
	// historySlots is the number of minutes kept: 24 hours.
	historySlots = 24 * 60
	// historyTTL is how long the history key lives after its last write.
	historyTTL = 25 * time.Hour
	// historyFlush is the longest a worker holds counts before writing them.
	historyFlush = time.Second
)

// historyLateness are the upper bounds of Minute.Late's buckets; the last
// bucket holds everything at or above the last bound.
var historyLateness = [...]time.Duration{10 * time.Millisecond, 100 * time.Millisecond, time.Second, 10 * time.Second}

// Minute.Late has a bucket per bound of historyLateness and the open one.
var _ [len(Minute{}.Late) - len(historyLateness) - 1]struct{}
var _ [len(historyLateness) + 1 - len(Minute{}.Late)]struct{}

// Minute is one minute of a queue's history (Redis clock).
type Minute struct {
	Start time.Time // the minute's first instant
	// OK counts handler calls that returned nil (acked); Retried those
	// that failed and were put back to due; Dead those that failed and
	// were dead-lettered (ErrSkipRetry, or MaxAttempts reached).
	OK, Retried, Dead int64
	// LateSum is the total lateness (Task.Lateness, millisecond precision)
	// of the tasks counted above; Late counts them by lateness: under
	// 10 ms, 100 ms, 1 s, 10 s, and 10 s or more.
	LateSum time.Duration
	Late    [5]int64
	// LateMean is the mean lateness of the minute's handled tasks, and
	// LateP99 an upper bound of its 99th percentile: the bound of the Late
	// bucket holding it (10 s for the last). Both 0 when nothing was
	// handled.
	LateMean, LateP99 time.Duration
}

// handled is OK + Retried + Dead.
func (m Minute) handled() int64 { return m.OK + m.Retried + m.Dead }

// lateCount is the number of lateness values counted: Handled, unless
// a write was lost halfway.
func (m Minute) lateCount() int64 {
	var n int64
	for _, c := range m.Late {
		n += c
	}
	return n
}

// lateMean is the mean lateness of the minute's handled tasks (0 if none).
func (m Minute) lateMean() time.Duration {
	if n := m.lateCount(); n > 0 {
		return m.LateSum / time.Duration(n)
	}
	return 0
}

// lateUpper returns an upper bound of the p-th percentile (0 < p ≤ 100)
// of the minute's lateness: the bound of the bucket holding it, or the
// last bound when it is in the open bucket. It is 0 when nothing was
// handled.
func (m Minute) lateUpper(p float64) time.Duration {
	n := m.lateCount()
	if n == 0 {
		return 0
	}
	rank := max(int64(math.Ceil(float64(n)*p/100)), 1)
	var seen int64
	for b, c := range m.Late {
		seen += c
		if seen >= rank && b < len(historyLateness) {
			return historyLateness[b]
		}
	}
	return historyLateness[len(historyLateness)-1]
}

// summarize sets the fields computed from the counts.
func (m *Minute) summarize() {
	m.LateMean, m.LateP99 = m.lateMean(), m.lateUpper(99)
}

func (m *Minute) add(o Minute) {
	m.OK += o.OK
	m.Retried += o.Retried
	m.Dead += o.Dead
	m.LateSum += o.LateSum
	for b := range m.Late {
		m.Late[b] += o.Late[b]
	}
}

// histMetrics name the fields of one slot ("<slot>:<metric>"); short
// names keep the hash small.
var histMetrics = func() []string {
	m := []string{"m", "ok", "r", "d", "ls"}
	for b := range len(Minute{}.Late) {
		m = append(m, "l"+strconv.Itoa(b))
	}
	return m
}()

func histField(slot int64, metric string) string {
	return strconv.FormatInt(slot, 10) + ":" + metric
}

func histSlot(minute int64) int64 {
	s := minute % historySlots
	if s < 0 {
		s += historySlots
	}
	return s
}

func lateBucket(l time.Duration) int {
	for b, bound := range historyLateness {
		if l < bound {
			return b
		}
	}
	return len(historyLateness)
}

// histAgg is a taker's counts not yet written, by Unix minute.
type histAgg struct {
	mu  sync.Mutex
	m   map[int64]*Minute
	set map[int64]bool // minutes whose slot this taker saw claimed
}

// record counts one handled task (res HandleOK, or a failure whose
// outcome is Retried or Dead) finished at now (Redis clock).
func (a *histAgg) record(now time.Time, res HandleResult, out outcome, late time.Duration) {
	var d Minute
	switch {
	case res == HandleOK:
		d.OK = 1
	case out == outcomeRetried:
		d.Retried = 1
	case out == outcomeDead:
		d.Dead = 1
	default:
		return // cancelled meanwhile, or the outcome is unknown (error)
	}
	late = max(late, 0)
	d.LateSum = late.Truncate(time.Millisecond)
	d.Late[lateBucket(late)] = 1
	a.add(now.Unix()/60, d)
}

func (a *histAgg) add(minute int64, d Minute) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[int64]*Minute{}
	}
	cur := a.m[minute]
	if cur == nil {
		cur = &Minute{}
		a.m[minute] = cur
	}
	cur.add(d)
}

func (a *histAgg) take() map[int64]*Minute {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.m
	a.m = nil
	return m
}

// flush writes the held counts to q's history hash: per minute, its slot
// is claimed (once per minute per taker) and its fields incremented, all
// minutes in one pipeline. Counts that could not be written are kept for
// the next flush; counts older than the kept window are dropped.
func (a *histAgg) flush(ctx context.Context, q *Queue) error {
	pending := a.take()
	if len(pending) == 0 {
		return nil
	}
	oldest := q.ServerNow().Unix()/60 - historySlots + 1
	var errs []error
	write := make([]int64, 0, len(pending))
	for minute := range pending {
		if minute < oldest {
			delete(pending, minute)
			continue
		}
		if a.claimed(minute) {
			write = append(write, minute)
			continue
		}
		ok, err := q.claimSlot(ctx, minute)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok { // the slot already counts a later minute
			delete(pending, minute)
			continue
		}
		a.setClaimed(minute)
		write = append(write, minute)
	}
	if len(write) > 0 {
		_, err := q.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, minute := range write {
				s, d := histSlot(minute), pending[minute]
				incr := func(metric string, v int64) {
					if v != 0 {
						p.HIncrBy(ctx, q.k.hist, histField(s, metric), v)
					}
				}
				incr("ok", d.OK)
				incr("r", d.Retried)
				incr("d", d.Dead)
				incr("ls", d.LateSum.Milliseconds())
				for b, c := range d.Late {
					incr("l"+strconv.Itoa(b), c)
				}
			}
			p.PExpire(ctx, q.k.hist, historyTTL)
			return nil
		})
		if err != nil {
			// A pipeline may have applied some increments: keeping them
			// could count twice, so they are dropped and reported.
			errs = append(errs, fmt.Errorf("%w: history: %w", ErrRedis, err))
		}
		for _, minute := range write {
			delete(pending, minute)
		}
	}
	for minute, d := range pending {
		a.add(minute, *d) // claims that failed: try again next flush
	}
	return errors.Join(errs...)
}

func (a *histAgg) claimed(minute int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.set[minute]
}

func (a *histAgg) setClaimed(minute int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.set == nil {
		a.set = map[int64]bool{}
	}
	for m := range a.set {
		if m < minute-2 {
			delete(a.set, m)
		}
	}
	a.set[minute] = true
}

// claimSlot makes minute's slot count minute: when it holds an older
// minute (a day ago or more) it clears the slot's fields under WATCH, so
// no increment of the new minute is lost to the clearing. It returns
// false when the slot holds a later minute (these counts are too old).
func (q *Queue) claimSlot(ctx context.Context, minute int64) (bool, error) {
	s := histSlot(minute)
	mf := histField(s, "m")
	fields := make([]string, 0, len(histMetrics))
	for _, m := range histMetrics[1:] {
		fields = append(fields, histField(s, m))
	}
	var later bool
	claim := func(tx *redis.Tx) error {
		cur, err := tx.HGet(ctx, q.k.hist, mf).Int64()
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			return err
		case cur == minute:
			return nil
		case cur > minute:
			later = true
			return nil
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.HDel(ctx, q.k.hist, fields...)
			p.HSet(ctx, q.k.hist, mf, minute)
			return nil
		})
		return err
	}
	var err error
	// Every write to the hash (other workers' increments) fails the WATCH;
	// a few tries suffice since a writer only claims once a minute.
	for range 8 {
		if err = q.c.Watch(ctx, claim, q.k.hist); !errors.Is(err, redis.TxFailedErr) {
			break
		}
	}
	if err != nil {
		return false, fmt.Errorf("%w: history claim: %w", ErrRedis, err)
	}
	return !later, nil
}

// History returns the queue's minutes from since (rounded down to its
// minute; at most historySlots minutes back) to the current minute (Redis
// clock), oldest first, one per minute: a minute no worker wrote counts
// zero. It reads one hash.
func (q *Queue) History(ctx context.Context, since time.Time) ([]Minute, error) {
	all, err := q.c.HGetAll(ctx, q.k.hist).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: history: %w", ErrRedis, err)
	}
	now := q.ServerNow().Unix() / 60
	return historyFrom(all, since, now), nil
}

// historyFrom decodes a history hash into the dense minutes from since to
// now (Unix minutes). Slots whose minute is outside the window, or not
// the minute the window expects there, count zero.
func historyFrom(h map[string]string, since time.Time, now int64) []Minute {
	first := min(max(since.Unix()/60, now-historySlots+1), now)
	out := make([]Minute, now-first+1)
	for i := range out {
		out[i].Start = time.Unix((first+int64(i))*60, 0)
	}
	for f, v := range h {
		slotS, metric, ok := strings.Cut(f, ":")
		if !ok || metric != "m" {
			continue
		}
		slot, err1 := strconv.ParseInt(slotS, 10, 64)
		minute, err2 := strconv.ParseInt(v, 10, 64)
		if err1 != nil || err2 != nil || minute < first || minute > now || histSlot(minute) != slot {
			continue
		}
		m := &out[minute-first]
		get := func(metric string) int64 {
			n, _ := strconv.ParseInt(h[histField(slot, metric)], 10, 64)
			return n
		}
		m.OK, m.Retried, m.Dead = get("ok"), get("r"), get("d")
		m.LateSum = time.Duration(get("ls")) * time.Millisecond
		for b := range m.Late {
			m.Late[b] = get("l" + strconv.Itoa(b))
		}
	}
	for i := range out {
		out[i].summarize()
	}
	return out
}

// History sums the shards' histories minute by minute (see Queue.History).
func (s *Sharded) History(ctx context.Context, since time.Time) ([]Minute, error) {
	var sum []Minute
	for i, q := range s.shards {
		h, err := q.History(ctx, since)
		if err != nil {
			return nil, fmt.Errorf("delay: shard %d: %w", i, err)
		}
		sum = mergeHistory(sum, h)
	}
	return sum, nil
}

// mergeHistory adds b into a by minute; the shards' clocks agree to the
// minute at most, so the result covers both ranges.
func mergeHistory(a, b []Minute) []Minute {
	by := make(map[int64]Minute, len(a))
	for _, m := range append(append([]Minute(nil), a...), b...) {
		cur, ok := by[m.Start.Unix()]
		if !ok {
			cur.Start = m.Start
		}
		cur.add(m)
		by[m.Start.Unix()] = cur
	}
	out := make([]Minute, 0, len(by))
	for _, m := range by {
		m.summarize()
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}
