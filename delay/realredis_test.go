package delay

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/measure"
	"github.com/tierset/tierset/internal/soak"
	"github.com/tierset/tierset/internal/testredis"
)

// usedMemory is INFO used_memory (measure.UsedMemory), failing the test
// where it is not reported.
func usedMemory(t *testing.T, ctx context.Context, c redis.UniversalClient) int64 {
	t.Helper()
	n, ok, err := measure.UsedMemory(ctx, c)
	if err != nil || !ok {
		t.Fatalf("INFO used_memory: reported %v, %v", ok, err)
	}
	return n
}

// Memory per pending task, 25-byte business key, index and metadata
// included: INFO used_memory before and after 100k tasks, on a private
// redis-server so other tests' keys do not move the figure. The
// budget is 300 B with the payload excluded. The tighter budget holds
// while a record fits Redis's hash-max-listpack-value (64 B by default), so
// its bucket stays a listpack; a 200-byte payload does not fit, and that
// row shows what such a queue costs. "ids=6" starts the ID counter at 36^5,
// so IDs have the six base-36 digits of a queue past 60 million tasks.
func TestMemoryPerPendingTask(t *testing.T) {
	soak.Require(t, "100k tasks per case on a private redis-server")
	r := testredis.StartServer(t)
	ctx := testCtx(t)
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	cases := []struct {
		n, payload, idDigits int     // idDigits 0: a fresh counter (IDs from "1")
		budget               float64 // B per task, payload excluded
	}{
		{100_000, 0, 0, 230}, {100_000, 16, 0, 230}, {100_000, 16, 6, 240}, {100_000, 200, 0, 300},
		{20_000, 16, 0, 240}, // fewer keys per index bucket: the buckets' own cost shows
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("tasks=%d/payload=%d/ids=%d", tc.n, tc.payload, tc.idDigits), func(t *testing.T) {
			q, err := New(c, fmt.Sprintf("mem%d-%d-%d", tc.n, tc.payload, tc.idDigits), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.idDigits > 0 {
				first := int64(1)
				for range tc.idDigits - 1 {
					first *= 36
				}
				if err := c.HSet(ctx, q.k.ctr, "id", first).Err(); err != nil {
					t.Fatal(err)
				}
			}
			n := tc.n
			before := usedMemory(t, ctx, c)
			p := make([]byte, tc.payload)
			res := mustEnqueueBatch(t, ctx, q, jobsOf(n, func(k int) Job {
				key := fmt.Sprintf("order:2024-12-01:%08d", k) // 25 bytes
				return Job{Key: key, Payload: p, When: After(time.Hour + time.Duration(k)*time.Millisecond)}
			}))
			if got := len(res[0].ID); tc.idDigits > 0 && got != tc.idDigits {
				t.Fatalf("first ID %q has %d digits, want %d", res[0].ID, got, tc.idDigits)
			}
			dropReplies(t, ctx, c, q)
			after := usedMemory(t, ctx, c)
			per := float64(after-before)/float64(n) - float64(tc.payload)
			ids := "IDs from 1"
			if tc.idDigits > 0 {
				ids = fmt.Sprintf("%d-digit IDs", tc.idDigits)
			}
			t.Logf("used_memory delta %d B for %d pending tasks: %.1f B/task payload excluded (25-byte key, %d-byte payload, %s)",
				after-before, n, per, tc.payload, ids)
			if per > tc.budget {
				t.Fatalf("%.1f B per pending task (payload excluded), budget %.0f", per, tc.budget)
			}
			if err := c.FlushAll(ctx).Err(); err != nil { // this test's own server
				t.Fatal(err)
			}
		})
	}
}

// TestMemoryPerTombstone: what a finished task costs while Options.DoneTTL
// keeps it (record without payload, index entry, done ZSET member), by INFO
// used_memory on a private redis-server, against the empty queue.
func TestMemoryPerTombstone(t *testing.T) {
	soak.Require(t, "50k tombstones on a private redis-server")
	r := testredis.StartServer(t)
	ctx := testCtx(t)
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	q, err := New(c, "stones", Options{DoneTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	const n, budget = 50_000, 250.0
	before := usedMemory(t, ctx, c)
	p := make([]byte, 16)
	for i := 0; i < n; i += 1000 {
		jobs := make([]Job, 0, 1000)
		for k := i; k < i+1000; k++ {
			jobs = append(jobs, Job{Key: fmt.Sprintf("order:2024-12-01:%08d", k), Token: "expire", Payload: p})
		}
		if res, err := q.EnqueueBatch(ctx, jobs); err != nil || res[0].Err != nil {
			t.Fatalf("enqueue: %v %+v", err, res[0])
		}
	}
	for acked := 0; acked < n; {
		bt := mustTake(t, ctx, q, 1000)
		mustAckMany(t, ctx, q, bt.Tasks)
		acked += len(bt.Tasks)
	}
	st, err := q.Stats(ctx)
	if err != nil || st.Done != n || st.Pending+st.InFlight != 0 {
		t.Fatalf("stats %+v %v: want %d tombstones and nothing else", st, err, n)
	}
	dropReplies(t, ctx, c, q)
	per := float64(usedMemory(t, ctx, c)-before) / float64(n)
	t.Logf("used_memory: %.1f B per tombstone (25-byte key, 6-byte token; payload dropped)", per)
	if per > budget {
		t.Fatalf("%.1f B per tombstone, budget %.0f", per, budget)
	}
}

// 8 consumers, 100k tasks (4k without the soak switch): 0 lost, 0
// handled twice.
func TestEightConsumers100k(t *testing.T) {
	t.Parallel()
	testredis.EachReal(t, func(t *testing.T, b *testredis.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		t.Cleanup(cancel)
		q := newQ(t, b, Options{Lease: 30 * time.Second})
		n := soak.Pick[int64](100_000, 4_000)
		seen := make([]atomic.Int32, n)
		jobs := make([]Job, 0, n)
		for i := range n {
			jobs = append(jobs, Job{Key: "k" + strconv.Itoa(int(i))})
		}
		start := time.Now()
		mustEnqueueBatch(t, ctx, q, jobs)
		enqDone := time.Now()
		var handled atomic.Int64
		h := func(ctx context.Context, tk *Task) error {
			i, err := strconv.Atoi(tk.Key[1:])
			if err != nil {
				return Permanent(err)
			}
			seen[i].Add(1)
			handled.Add(1)
			return nil
		}
		var stops []func() error
		for range 8 {
			w, err := newWorker(q, h, workerOpts{Concurrency: 16, BatchSize: 100})
			if err != nil {
				t.Fatal(err)
			}
			stops = append(stops, runFunc(t, w.Run))
		}
		// judged on progress, not speed: a loaded machine under -race
		// drains 100k in a minute or more, a stuck queue stops acking
		waitProgress(t, 30*time.Second, "100k handled and acked", func() (int64, bool) {
			st, err := q.Stats(ctx)
			return st.Acked, err == nil && st.Acked == n
		})
		took := time.Since(enqDone)
		// All eight at once: each Run waits up to WakeBlock for its wake
		// BLPOP, and one after another those waits add up.
		var stopping sync.WaitGroup
		for _, s := range stops {
			stopping.Go(func() { _ = s() })
		}
		stopping.Wait()
		lost, twice := 0, 0
		for i := range seen {
			switch v := seen[i].Load(); {
			case v == 0:
				lost++
			case v > 1:
				twice++
			}
		}
		if lost != 0 || twice != 0 || handled.Load() != n {
			t.Fatalf("lost %d, handled twice %d, handled %d", lost, twice, handled.Load())
		}
		t.Logf("enqueue %d: %v; 8 workers take+handle+ack: %v (incl. -race if on)", n, enqDone.Sub(start), took)
		assertOnlyCounters(t, b, q)
	})
}

// Redis restart: the worker backs off, reconnects and resumes.
func TestWorkerSurvivesRedisRestart(t *testing.T) {
	t.Parallel()
	r := testredis.StartServer(t)
	ctx := testCtx(t)
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	rec := &Recorder{}
	q, err := New(c, "restart", Options{Lease: time.Second, Observer: obsOf(rec)})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string]bool{}
	w, _ := newWorker(q, func(ctx context.Context, tk *Task) error {
		mu.Lock()
		got[tk.Key] = true
		mu.Unlock()
		return nil
	}, workerOpts{Concurrency: 4, ReconnectMax: 300 * time.Millisecond})
	stop := runFunc(t, w.Run)
	has := func(keys ...string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, k := range keys {
				if !got[k] {
					return false
				}
			}
			return true
		}
	}
	mustEnqueue(t, ctx, q, Job{Key: "before"})
	waitFor(t, 5*time.Second, "task before restart", has("before"))

	r.Kill() // SIGKILL the server we started (Kill returns once it has exited); its data is gone
	// the worker's blocked wake-list read loses its connection and reports it
	waitFor(t, 5*time.Second, "the worker to observe Redis down", func() bool { return rec.Errors.Load() > 0 })
	if _, err := q.Enqueue(ctx, Job{Key: "while-down"}); err == nil {
		t.Fatal("enqueue succeeded with Redis down")
	}
	r.Start()
	// EnqueueBatch pipelines EVALSHA: the restarted server has no scripts, so
	// this also proves the NOSCRIPT reload path.
	jobs := jobsOf(3, func(i int) Job {
		return Job{Key: fmt.Sprintf("after%d", i), Token: "t", When: After(time.Duration(i*50) * time.Millisecond)}
	})
	waitFor(t, 5*time.Second, "enqueue after restart", func() bool {
		res, err := q.EnqueueBatch(ctx, jobs)
		if err != nil {
			return false
		}
		for _, r := range res {
			if r.Err != nil {
				return false
			}
		}
		return true
	})
	waitFor(t, 10*time.Second, "tasks after restart", has("after0", "after1", "after2"))
	_ = stop()
	if rec.Errors.Load() == 0 {
		t.Fatal("the worker saw no error: was Redis really down?")
	}
	t.Logf("errors observed while down: %d", rec.Errors.Load())
}
