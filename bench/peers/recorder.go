package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/measure"
)

// payloadSize is the payload every task of the Go libraries carries: the
// intended due time (Unix ns, big endian) and a task number, so the handler
// computes lateness and detects duplicates without a lookup.
const payloadSize = 16

func makePayload(due time.Time, n uint64) []byte {
	p := make([]byte, payloadSize)
	binary.BigEndian.PutUint64(p[:8], uint64(due.UnixNano()))
	binary.BigEndian.PutUint64(p[8:], n)
	return p
}

func parsePayload(p []byte) (due time.Time, n uint64, ok bool) {
	if len(p) != payloadSize {
		return time.Time{}, 0, false
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(p[:8]))), binary.BigEndian.Uint64(p[8:]), true
}

// businessKey is a 25-byte business key, the same for every library
// (asynq gets it as its TaskID, BullMQ as its jobId, River as its unique
// argument, tierset as its business key).
func businessKey(run string, n uint64) string {
	k := fmt.Sprintf("order:%s:%012d", run, n)
	return k
}

// recorder collects the deliveries of one phase: lateness (delivery time minus
// the intended due time carried in the payload, both read from this
// process's clock, which is also the Redis server's clock on this host), the
// first and last delivery, and duplicates.
type recorder struct {
	mu        sync.Mutex
	lo        uint64 // the phase's task numbers are lo .. lo+want-1
	want      int
	late      []time.Duration
	seen      map[uint64]struct{}
	dups      int
	bad       int
	first     time.Time
	last      time.Time
	completed chan struct{}
}

func newRecorder(lo uint64, want int) *recorder {
	return &recorder{
		lo:        lo,
		want:      want,
		late:      make([]time.Duration, 0, want),
		seen:      make(map[uint64]struct{}, want),
		completed: make(chan struct{}),
	}
}

func (r *recorder) deliver(payload []byte) {
	now := time.Now()
	due, n, ok := parsePayload(payload)
	if !ok {
		r.mu.Lock()
		r.bad++
		r.mu.Unlock()
		return
	}
	r.record(n, now.Sub(due), now)
}

// record notes that task n was handled at, late after its due time.
func (r *recorder) record(n uint64, late time.Duration, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n < r.lo || n >= r.lo+uint64(r.want) {
		// Not this phase's: a task of an earlier phase (all of which
		// were handled) handled again.
		r.bad++
		return
	}
	if _, dup := r.seen[n]; dup {
		r.dups++
		return
	}
	r.seen[n] = struct{}{}
	if r.first.IsZero() || at.Before(r.first) {
		r.first = at
	}
	if at.After(r.last) {
		r.last = at
	}
	r.late = append(r.late, late)
	if len(r.late) == r.want {
		close(r.completed)
	}
}

// wait blocks until every task was delivered or the deadline passes.
func (r *recorder) wait(ctx context.Context, deadline time.Time) bool {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	select {
	case <-r.completed:
		return true
	case <-ctx.Done():
		return false
	}
}

type latency struct {
	n                       int
	min, p50, p99, max      time.Duration // of handled − due
	p99abs                  time.Duration // of |handled − due|: early counts as much as late
	early                   int           // tasks handled before their due time
	delivered, dups, broken int
	throughput              float64 // tasks/s from the first delivery to the last
}

func (r *recorder) summary() latency {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := slices.Clone(r.late)
	slices.Sort(s)
	l := latency{n: len(s), delivered: len(s), dups: r.dups, broken: r.bad}
	if len(s) == 0 {
		return l
	}
	l.min, l.max = s[0], s[len(s)-1]
	l.p50, l.p99 = measure.Quantile(s, 0.50), measure.Quantile(s, 0.99)
	abs := make([]time.Duration, len(s))
	for i, d := range s {
		if d < 0 {
			l.early++
			d = -d
		}
		abs[i] = d
	}
	slices.Sort(abs)
	l.p99abs = measure.Quantile(abs, 0.99)
	if span := r.last.Sub(r.first); len(s) > 1 && span > 0 {
		l.throughput = float64(len(s)-1) / span.Seconds()
	}
	return l
}

// deleteKeys removes the keys matching pattern with SCAN + DEL (never FLUSH*).
func deleteKeys(ctx context.Context, c *redis.Client, pattern string) (int, error) {
	return measure.DeleteKeys(ctx, c, pattern)
}

// usedMemory is INFO used_memory: what a Redis peer's footprint is.
func usedMemory(ctx context.Context, c *redis.Client) (int64, string, error) {
	b, ok, err := measure.UsedMemory(ctx, c)
	if err == nil && !ok {
		err = fmt.Errorf("%s reports no used_memory", c.Options().Addr)
	}
	return b, "Redis INFO used_memory", err
}
