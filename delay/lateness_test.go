package delay

import (
	"fmt"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

// The take script files every delivery under its lateness by the server's
// clock, so Stats reports percentiles across every worker of the queue.
func TestStatsLatenessBucketsByServerClock(t *testing.T) {
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
		ctx := testCtx(t)
		q := newQ(t, b, Options{})
		var now time.Time
		if b.Mini != nil {
			now = time.Now().Truncate(time.Millisecond)
			b.Mini.SetTime(now)
		} else {
			tm, err := b.Client.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			now = tm.Truncate(time.Millisecond)
		}
		// 3 tasks 300 ms late and 1 task 5 s late, as of the server's now.
		lates := []time.Duration{300 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond, 5 * time.Second}
		for i, l := range lates {
			mustEnqueue(t, ctx, q, Job{Key: fmt.Sprintf("late-%d", i), When: At(now.Add(-l))})
		}
		if got := len(mustTake(t, ctx, q, 10).Tasks); got != len(lates) {
			t.Fatalf("took %d tasks", got)
		}
		st, err := q.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// 300 ms (+ the few ms the take took on a real server) has bit
		// length 9: [256, 512); 5 s has bit length 13: [4096, 8192).
		if st.Lateness.Counts[9] != 3 || st.Lateness.Counts[13] != 1 || st.Lateness.Total() != 4 {
			t.Fatalf("lateness buckets = %v", st.Lateness.Counts)
		}
		if p50 := st.Lateness.Percentile(50); p50 != 512*time.Millisecond {
			t.Errorf("p50 bound = %v, want 512ms", p50)
		}
		if p99 := st.Lateness.Percentile(99); p99 != 8192*time.Millisecond {
			t.Errorf("p99 bound = %v, want 8.192s", p99)
		}
		if (LatenessBuckets{}).Percentile(99) != 0 {
			t.Error("empty histogram has a percentile")
		}
	})
}
