package delay

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/measure"
	"github.com/tierset/tierset/internal/testredis"
)

// memPart is one row of TestMemoryPerPart: the keys of a queue that make
// up one part of what a pending task costs.
type memPart struct {
	name  string
	match func(k keys, key string) bool
}

var memParts = []memPart{
	{"due ZSET", func(k keys, key string) bool { return key == k.due }},
	{"idx (index entry)", func(k keys, key string) bool { return key == k.idx || strings.HasPrefix(key, k.idx+":") }},
	{"tasks buckets (record)", func(k keys, key string) bool { return strings.HasPrefix(key, k.tasks+":") }},
	{"rp (kept replies)", func(k keys, key string) bool { return strings.HasPrefix(key, k.rp) }},
	{"ctr, stats, wake, other", func(keys, string) bool { return true }},
}

// TestMemoryPerPart is the measurement behind the per-part table in
// docs/benchmarks.md ("Memory per pending task, by part"): the bench's
// memory phase (bench/internal/delaybench: EnqueueBatch of 1000, 25-byte
// business key "order:<6>:<12 digits>", generated token, 16 B payload, due
// in an hour) on a private redis-server, then MEMORY USAGE of every key of
// the queue grouped by part, and INFO used_memory against the empty server.
// Replies are kept, as in the bench. The budget, payload excluded, guards
// against growth: both figures measure 208-232 B today, and the 200 B
// target needs the index or the due set in listpack buckets, whose cost in
// Redis calls docs/benchmarks.md gives.
func TestMemoryPerPart(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: up to 100k tasks per case on a private redis-server")
	}
	r := testredis.StartServer(t)
	ctx := testCtx(t)
	c := r.Client(nil)
	const payload, budget = 16, 240.0
	for _, n := range []int{50_000, 100_000} {
		t.Run(fmt.Sprintf("tasks=%d", n), func(t *testing.T) {
			t.Cleanup(func() { _ = c.FlushAll(context.WithoutCancel(ctx)).Err() }) // this test's own server
			q, err := New(c, fmt.Sprintf("parts%d", n), Options{})
			if err != nil {
				t.Fatal(err)
			}
			before := usedMemory(t, ctx, c)
			jobs := make([]Job, 0, MaxBatch)
			p := make([]byte, payload)
			for i := 0; i < n; i += MaxBatch {
				jobs = jobs[:0]
				for k := i; k < min(i+MaxBatch, n); k++ {
					jobs = append(jobs, Job{Key: fmt.Sprintf("order:%s:%012d", "a1b2c3", k), Payload: p, When: After(time.Hour)})
				}
				res, err := q.EnqueueBatch(ctx, jobs)
				if err != nil || res[0].Err != nil {
					t.Fatalf("enqueue: %v %v", err, res)
				}
			}
			used := float64(usedMemory(t, ctx, c)-before)/float64(n) - payload
			perPart, total, nkeys := memoryByPart(t, ctx, c, q)
			var b strings.Builder
			fmt.Fprintf(&b, "%d tasks, 25 B key, generated token, %d B payload (in the record):\n", n, payload)
			for i, part := range memParts {
				fmt.Fprintf(&b, "  %-26s %7.1f B/task  (%d keys)\n", part.name, float64(perPart[i].bytes)/float64(n), perPart[i].keys)
			}
			byKeys := float64(total)/float64(n) - payload
			fmt.Fprintf(&b, "  MEMORY USAGE, payload excluded: %.1f B/task over %d keys; INFO used_memory: %.1f B/task", byKeys, nkeys, used)
			t.Log(b.String())
			if byKeys > budget || used > budget {
				t.Fatalf("%.1f B (MEMORY USAGE), %.1f B (used_memory) per pending task, payload excluded; budget %.0f", byKeys, used, budget)
			}
		})
	}
}

type partSize struct {
	bytes int64
	keys  int
}

// memoryByPart sums MEMORY USAGE (every element: SAMPLES 0) of the queue's
// keys by memParts row, each key in the first row that matches it.
func memoryByPart(t *testing.T, ctx context.Context, c redis.UniversalClient, q *Queue) ([]partSize, int64, int) {
	t.Helper()
	ks, err := measure.Keys(ctx, c, strings.TrimSuffix(q.k.due, "due")+"*")
	if err != nil {
		t.Fatal(err)
	}
	out := make([]partSize, len(memParts))
	var total int64
	pipe := c.Pipeline()
	cmds := make([]*redis.IntCmd, len(ks))
	for i, key := range ks {
		cmds[i] = pipe.MemoryUsage(ctx, key, 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("MEMORY USAGE: %v", err)
	}
	for i, key := range ks {
		for j, part := range memParts {
			if part.match(q.k, key) {
				out[j].bytes += cmds[i].Val()
				out[j].keys++
				break
			}
		}
		total += cmds[i].Val()
	}
	return out, total, len(ks)
}
