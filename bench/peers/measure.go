package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
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
	l.p50, l.p99 = quantile(s, 0.50), quantile(s, 0.99)
	if span := r.last.Sub(r.first); len(s) > 1 && span > 0 {
		l.throughput = float64(len(s)-1) / span.Seconds()
	}
	return l
}

// quantile is the nearest-rank quantile of sorted samples.
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// usedMemory reads INFO memory used_memory.
func usedMemory(ctx context.Context, c redis.Cmdable) (int64, error) {
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO memory: %w", err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("INFO memory: no used_memory field")
}

// scanKeys lists the keys matching pattern (SCAN, never KEYS).
func scanKeys(ctx context.Context, c redis.Cmdable, pattern string) ([]string, error) {
	var out []string
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, pattern, 1000).Result()
		if err != nil {
			return out, fmt.Errorf("SCAN %s: %w", pattern, err)
		}
		out = append(out, keys...)
		if cursor = next; cursor == 0 {
			return out, nil
		}
	}
}

// keysMemory sums MEMORY USAGE (all samples) over the keys matching pattern:
// a cross-check of the used_memory delta that other clients of a shared
// server cannot disturb.
func keysMemory(ctx context.Context, c redis.Cmdable, pattern string) (int64, int, error) {
	keys, err := scanKeys(ctx, c, pattern)
	if err != nil {
		return 0, 0, err
	}
	var total int64
	for chunk := range slices.Chunk(keys, 500) {
		cmds := make([]*redis.IntCmd, len(chunk))
		pipe := c.Pipeline()
		for i, k := range chunk {
			cmds[i] = pipe.MemoryUsage(ctx, k, 0)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return 0, 0, fmt.Errorf("MEMORY USAGE: %w", err)
		}
		for _, cmd := range cmds {
			total += cmd.Val()
		}
	}
	return total, len(keys), nil
}

// deleteKeys removes the keys matching pattern with SCAN + DEL (never FLUSH*).
func deleteKeys(ctx context.Context, c redis.Cmdable, pattern string) (int, error) {
	keys, err := scanKeys(ctx, c, pattern)
	if err != nil {
		return 0, err
	}
	for chunk := range slices.Chunk(keys, 500) {
		if err := c.Del(ctx, chunk...).Err(); err != nil {
			return 0, fmt.Errorf("DEL: %w", err)
		}
	}
	return len(keys), nil
}

// ms formats a duration in milliseconds with 2 decimals.
func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) }
