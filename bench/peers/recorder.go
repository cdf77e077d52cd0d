package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/measure"
)

// payloadSize is the payload every task of both libraries carries: the
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

// businessKey is a 25-byte business key, the same for both libraries
// (asynq gets it as its TaskID, tierset as its business key).
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
	want      int
	late      []time.Duration
	seen      map[uint64]struct{}
	dups      int
	bad       int
	first     time.Time
	last      time.Time
	completed chan struct{}
}

func newRecorder(want int) *recorder {
	return &recorder{
		want:      want,
		late:      make([]time.Duration, 0, want),
		seen:      make(map[uint64]struct{}, want),
		completed: make(chan struct{}),
	}
}

func (r *recorder) deliver(payload []byte) {
	now := time.Now()
	due, n, ok := parsePayload(payload)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !ok {
		r.bad++
		return
	}
	if _, dup := r.seen[n]; dup {
		r.dups++
		return
	}
	r.seen[n] = struct{}{}
	if r.first.IsZero() {
		r.first = now
	}
	r.last = now
	r.late = append(r.late, now.Sub(due))
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
	min, p50, p99, max      time.Duration
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
	if span := r.last.Sub(r.first); len(s) > 1 && span > 0 {
		l.throughput = float64(len(s)-1) / span.Seconds()
	}
	return l
}

// deleteKeys removes the keys matching pattern with SCAN + DEL (never FLUSH*).
func deleteKeys(ctx context.Context, c *redis.Client, pattern string) (int, error) {
	return measure.DeleteKeys(ctx, c, pattern)
}

// ms formats a duration in milliseconds with 2 decimals.
func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) }
