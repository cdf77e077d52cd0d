package delay

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/measure"
	"github.com/tierset/tierset/internal/soak"
	"github.com/tierset/tierset/internal/testredis"
)

// memParts are the rows of TestMemoryPerPart: each part of what a pending
// task costs, as the glob pattern of its keys. Every key of the queue not
// matched by one of them is counted under "ctr, stats, wake, other".
var memParts = []struct {
	name    string
	pattern func(k keys) string
}{
	{"due ZSET", func(k keys) string { return k.due }},
	{"idx (index entry)", func(k keys) string { return k.idx }},
	{"tasks buckets (record)", func(k keys) string { return k.tasks + ":*" }},
	{"rp (kept replies)", func(k keys) string { return k.rp + "*" }},
}

// TestMemoryPerPart is the measurement behind the per-part table in
// docs/benchmarks.md ("Memory per pending task, by part"): the bench's
// memory phase (bench/internal/delaybench: EnqueueBatch, 1000 a pipeline, 25-byte
// business key "order:<6>:<12 digits>", generated token, 16 B payload, due
// in an hour) on a private redis-server, then MEMORY USAGE of every key of
// the queue grouped by part, and INFO used_memory against the empty server.
// Replies are kept, as in the bench. The budget, payload excluded, guards
// against growth: both figures measure 208-232 B today, and the 200 B
// target needs the index or the due set in listpack buckets, whose cost in
// Redis calls docs/benchmarks.md gives.
func TestMemoryPerPart(t *testing.T) {
	soak.Require(t, "up to 100k tasks per case on a private redis-server")
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
			p := make([]byte, payload)
			mustEnqueueBatch(t, ctx, q, jobsOf(n, func(k int) Job {
				return Job{Key: fmt.Sprintf("order:%s:%012d", "a1b2c3", k), Payload: p, When: After(time.Hour)}
			}))
			used := float64(usedMemory(t, ctx, c)-before)/float64(n) - payload
			var b strings.Builder
			fmt.Fprintf(&b, "%d tasks, 25 B key, generated token, %d B payload (in the record):\n", n, payload)
			total, nkeys := keysMemory(t, ctx, c, strings.TrimSuffix(q.k.due, "due")+"*")
			rest, restKeys := total, nkeys
			for _, part := range memParts {
				bytes, keys := keysMemory(t, ctx, c, part.pattern(q.k))
				rest, restKeys = rest-bytes, restKeys-keys
				fmt.Fprintf(&b, "  %-26s %7.1f B/task  (%d keys)\n", part.name, float64(bytes)/float64(n), keys)
			}
			fmt.Fprintf(&b, "  %-26s %7.1f B/task  (%d keys)\n", "ctr, stats, wake, other", float64(rest)/float64(n), restKeys)
			byKeys := float64(total)/float64(n) - payload
			fmt.Fprintf(&b, "  MEMORY USAGE, payload excluded: %.1f B/task over %d keys; INFO used_memory: %.1f B/task", byKeys, nkeys, used)
			t.Log(b.String())
			if byKeys > budget || used > budget {
				t.Fatalf("%.1f B (MEMORY USAGE), %.1f B (used_memory) per pending task, payload excluded; budget %.0f", byKeys, used, budget)
			}
		})
	}
}

// keysMemory is measure.KeysMemory (MEMORY USAGE, every element) of the
// keys matching pattern, failing the test where it is not reported.
func keysMemory(t *testing.T, ctx context.Context, c redis.UniversalClient, pattern string) (bytes int64, keys int) {
	t.Helper()
	bytes, keys, ok, err := measure.KeysMemory(ctx, c, pattern)
	if err != nil || !ok {
		t.Fatalf("MEMORY USAGE of %s: reported %v, %v", pattern, ok, err)
	}
	return bytes, keys
}
