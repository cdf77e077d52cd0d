package delay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

// A prefetching worker gives its unstarted buffered tasks back at shutdown
// at once, attempt count restored, instead of leaving them to the lease.
func TestWorkerPrefetchReleasedOnShutdown(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{Lease: time.Minute}, func(t *testing.T, ctx context.Context, _ *testredis.Backend, q *Queue) {
		const n = 6
		for i := range n {
			mustEnqueue(t, ctx, q, Job{Key: "k" + strconv.Itoa(i)})
		}
		started := make(chan string, n)
		unblock := make(chan struct{})
		w, err := newWorker(q, func(ctx context.Context, tk *Task) error {
			started <- tk.Key
			<-unblock
			return nil
		}, workerOpts{Concurrency: 1, BatchSize: 10})
		if err != nil {
			t.Fatal(err)
		}
		stop := runFunc(t, w.Run)
		first := <-started
		// one running, the other five held in the buffer (one Take of all six)
		waitFor(t, 5*time.Second, "all six in flight", func() bool {
			st, err := q.Stats(ctx)
			return err == nil && st.InFlight == n
		})
		stopped := make(chan error, 1)
		go func() { stopped <- stop() }()
		waitFor(t, 5*time.Second, "five released while the handler runs", func() bool {
			st, err := q.Stats(ctx)
			return err == nil && st.Pending == n-1 && st.InFlight == 1
		})
		close(unblock)
		if err := <-stopped; !errors.Is(err, context.Canceled) || errors.Is(err, ErrShutdownTimeout) {
			t.Fatalf("Run = %v", err)
		}
		bt := mustTake(t, ctx, q, 10)
		if len(bt.Tasks) != n-1 {
			t.Fatalf("took %d released tasks, want %d", len(bt.Tasks), n-1)
		}
		for _, tk := range bt.Tasks {
			if tk.Key == first || tk.Attempt != 1 {
				t.Errorf("released task %s attempt %d (first handled %s)", tk.Key, tk.Attempt, first)
			}
		}
		if len(started) != 0 {
			t.Errorf("a buffered task was started after shutdown")
		}
	})
}

// A buffered task whose lease is more than half spent is never started: it
// is released and taken again with a fresh lease. Every task is handled
// exactly once, each with at least half its lease ahead.
func TestWorkerPrefetchNeverStartsNearlyExpired(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		// a second-scale lease: a handler stalled by a loaded machine must
		// not outlive it (the run is the same, five times slower)
		const lease = 2 * time.Second
		q := newQ(t, b, Options{Lease: lease})
		const n = 5
		for i := range n {
			mustEnqueue(t, ctx, q, Job{Key: "k" + strconv.Itoa(i)})
		}
		var mu sync.Mutex
		seen := map[string]int{}
		w, err := newWorker(q, func(ctx context.Context, tk *Task) error {
			left := tk.Deadline.Sub(q.ServerNow())
			mu.Lock()
			seen[tk.Key]++
			mu.Unlock()
			if left < lease/2-5*time.Millisecond {
				t.Errorf("%s started with %v of its lease left", tk.Key, left)
			}
			time.Sleep(750 * time.Millisecond)
			return nil
		}, workerOpts{Concurrency: 1, BatchSize: n})
		if err != nil {
			t.Fatal(err)
		}
		stop := runFunc(t, w.Run)
		waitFor(t, 20*time.Second, "all acked", func() bool {
			st, err := q.Stats(ctx)
			return err == nil && st.Acked == n
		})
		_ = stop()
		mu.Lock()
		defer mu.Unlock()
		for i := range n {
			if k := "k" + strconv.Itoa(i); seen[k] != 1 {
				t.Errorf("%s handled %d times", k, seen[k])
			}
		}
	})
}

// BenchmarkTakeAck: one worker, no-op handler, tasks due now, from the
// worker's start to the last ack (enqueue and shutdown outside the timer).
func BenchmarkTakeAck(b *testing.B) {
	backends := []func(testing.TB) *testredis.Backend{testredis.Mini}
	if testredis.URL() != "" {
		backends = append(backends, testredis.Redis)
	}
	const tasks = 20_000
	for _, conc := range []int{8, 100} {
		for _, batch := range []int{100} {
			for _, mk := range backends {
				be := mk(b)
				b.Run(fmt.Sprintf("conc=%d/batch=%d/backend=%s", conc, batch, be.Name), func(b *testing.B) {
					b.ReportAllocs()
					ctx := context.Background()
					var acked atomic.Int64
					q, err := New(be.Client, "bench"+strconv.Itoa(conc), Options{Prefix: be.Prefix, Observer: obsOf(&ackCounter{n: &acked})})
					if err != nil {
						b.Fatal(err)
					}
					rt, err := testredis.CountRoundTrips(ctx, be.Client)
					if err != nil {
						b.Fatal(err)
					}
					jobs := make([]Job, tasks)
					var elapsed time.Duration
					total, trips := 0, 0
					for it := range b.N {
						b.StopTimer()
						for i := range jobs {
							jobs[i] = Job{Key: "k" + strconv.Itoa(it) + "-" + strconv.Itoa(i)}
						}
						if _, err := q.EnqueueBatch(ctx, jobs); err != nil {
							b.Fatal(err)
						}
						acked.Store(0)
						w, err := newWorker(q, func(context.Context, *Task) error { return nil },
							workerOpts{Concurrency: conc, BatchSize: batch})
						if err != nil {
							b.Fatal(err)
						}
						wctx, cancel := context.WithCancel(ctx)
						done := make(chan error, 1)
						rt.Reset()
						b.StartTimer()
						start := time.Now()
						go func() { done <- w.Run(wctx) }()
						for acked.Load() < tasks {
							if time.Since(start) > 2*time.Minute {
								b.Fatalf("%d of %d acked after 2 minutes", acked.Load(), tasks)
							}
							time.Sleep(100 * time.Microsecond)
						}
						elapsed += time.Since(start)
						trips += rt.Total()
						total += tasks
						b.StopTimer()
						cancel()
						<-done
					}
					b.ReportMetric(float64(total)/elapsed.Seconds(), "tasks/s")
					b.ReportMetric(float64(total)/float64(max(trips, 1)), "tasks/roundtrip")
				})
			}
		}
	}
}

type ackCounter struct {
	NopObserver
	n *atomic.Int64
}

func (a *ackCounter) OnAck(string) { a.n.Add(1) }
