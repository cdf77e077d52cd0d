package delay

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/keyscan"
)

// BrowseOptions selects what Browse lists.
type BrowseOptions struct {
	// Tasks is how many due and in-flight tasks to list (0..MaxBatch).
	// Default 10; negative lists none.
	Tasks int
	// Horizon is how far ahead DueSoon counts. Default one minute.
	Horizon time.Duration
}

// Overview is what an operator looks at first, read in one script.
type Overview struct {
	ServerTime time.Time
	// DueSoon counts pending tasks not yet due that fall due within the horizon.
	DueSoon int64
	// Due are the pending tasks due soonest (overdue first), When = due time.
	Due []TaskInfo
	// InFlight are the leases that expire first, When = lease deadline.
	InFlight []TaskInfo
	// Corrupt counts listed tasks whose record did not decode (left out).
	Corrupt int
}

// Browse counts the tasks due within the horizon and lists the tasks due
// soonest and the oldest leases, by Redis TIME, in one round trip.
func (q *Queue) Browse(ctx context.Context, o BrowseOptions) (Overview, error) {
	switch {
	case o.Tasks == 0:
		o.Tasks = 10
	case o.Tasks < 0:
		o.Tasks = 0
	case o.Tasks > MaxBatch:
		return Overview{}, invalid("batch", "%d tasks", o.Tasks)
	}
	if o.Horizon <= 0 {
		o.Horizon = time.Minute
	}
	sent := q.o.Now()
	r, err := run(ctx, q.c, scriptBrowse, "browse", []string{q.k.due, q.k.inflight, q.k.tasks},
		q.epoch, q.mult, o.Horizon.Milliseconds(), o.Tasks)
	if err != nil {
		return Overview{}, err
	}
	q.observeTime(r.int(1), sent, q.o.Now())
	ov := Overview{ServerTime: time.UnixMilli(r.int(1)), DueSoon: r.int(2)}
	nDue := int(r.int(3))
	for i, k := 4, 0; i+2 < len(r); i, k = i+3, k+1 {
		st := StatePending
		if k >= nDue {
			st = StateInFlight
		}
		rec, err := decodeRecord(r.str(i+2), q.o.MaxPayload)
		if err != nil {
			ov.Corrupt++
			continue
		}
		ti := TaskInfo{ID: r.str(i), Key: rec.key, Token: rec.token, State: st, Attempt: rec.attempt, LastError: rec.err, LastErrors: rec.errs}
		if ti.Token == "" {
			ti.Token = ti.ID
		}
		if sc, ok := r.score(i + 1); ok {
			if st == StatePending {
				ti.When, _, _ = q.o.Codec.DecodeTime(sc)
			} else {
				ti.When = time.UnixMilli(sc)
				ti.Attempt++ // the delivery in hand
			}
		}
		if st == StatePending {
			ov.Due = append(ov.Due, ti)
		} else {
			ov.InFlight = append(ov.InFlight, ti)
		}
	}
	return ov, nil
}

// Discover lists the names of the queues stored under prefix (""
// = DefaultPrefix), sorted: every queue that ever had a task enqueued. It
// SCANs the keyspace (on every master of a Cluster), so it costs time in
// proportion to all keys in Redis: call it at start-up, not per request.
func Discover(ctx context.Context, c redis.UniversalClient, prefix string) ([]string, error) {
	if nilClient(c) {
		return nil, invalid("client", "nil client")
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	head, tail := prefix+":{q:", "}:ctr"
	var mu sync.Mutex
	seen := map[string]bool{}
	err := keyscan.Each(ctx, c, head+"*"+tail, func(_ context.Context, _ redis.Cmdable, key string) error {
		name := strings.TrimSuffix(strings.TrimPrefix(key, head), tail)
		if validateName(name) == nil {
			mu.Lock()
			seen[name] = true
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return nil, wrapErr(ctx, "discover", err)
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}
