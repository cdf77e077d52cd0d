package delay

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

// BenchmarkEnqueue measures enqueue throughput, one Enqueue per task
// (mode=single), one Enqueue per task from 64 goroutines at once, which
// Enqueue groups (mode=parallel64), and through EnqueueBatch in calls of
// MaxBatch jobs (mode=batch). One op is one task; tasks/s is reported as a metric. Keys
// are 25 bytes, like the memory budget's, payloads empty, due in an hour.
// backend=redis runs when TIERSET_REDIS_URL is set.
func BenchmarkEnqueue(b *testing.B) {
	backends := []struct {
		name string
		get  func(testing.TB) *testredis.Backend
	}{{"miniredis", testredis.Mini}}
	if testredis.URL() != "" {
		backends = append(backends, struct {
			name string
			get  func(testing.TB) *testredis.Backend
		}{"redis", testredis.Redis})
	}
	for _, mode := range []string{"single", "parallel64", "batch"} {
		for _, be := range backends {
			b.Run(fmt.Sprintf("mode=%s/backend=%s", mode, be.name), func(b *testing.B) {
				rb := be.get(b)
				q, err := New(rb.Client, "bench", Options{Prefix: rb.Prefix})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				jobs := make([]Job, MaxBatch)
				next := 0
				fill := func(n int) []Job {
					for i := range jobs[:n] {
						jobs[i] = Job{Key: fmt.Sprintf("order:2024-12-01:%08d", next), When: After(time.Hour)}
						next++
					}
					return jobs[:n]
				}
				b.ReportAllocs()
				b.ResetTimer()
				switch mode {
				case "single":
					for range b.N {
						b.StopTimer()
						j := fill(1)[0]
						b.StartTimer()
						if _, err := q.Enqueue(ctx, j); err != nil {
							b.Fatal(err)
						}
					}
				case "parallel64":
					b.StopTimer()
					all := make([]Job, b.N)
					for i := range all {
						all[i] = Job{Key: fmt.Sprintf("order:2024-12-01:%08d", i), When: After(time.Hour)}
					}
					var taken atomic.Int64
					b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
					b.StartTimer()
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							j := all[taken.Add(1)-1]
							if _, err := q.Enqueue(ctx, j); err != nil {
								b.Error(err)
								return
							}
						}
					})
				case "batch":
					for done := 0; done < b.N; {
						b.StopTimer()
						chunk := fill(min(MaxBatch, b.N-done))
						b.StartTimer()
						res, err := q.EnqueueBatch(ctx, chunk)
						if err != nil {
							b.Fatal(err)
						}
						for _, r := range res {
							if r.Err != nil || r.Duplicate || r.ID == "" {
								b.Fatalf("enqueue: %+v", r)
							}
						}
						done += len(chunk)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
			})
		}
	}
}
