package delay

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

// The take script files every delivery under its lateness by the server's
// clock, so Stats reports percentiles across every worker of the queue.
func TestStatsLatenessBucketsByServerClock(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
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
		// 3 tasks 300 s late and 1 task 5,000 s late, as of the server's
		// now: whole minutes inside their buckets, so a take that a loaded
		// machine holds back for seconds still files them where they belong.
		lates := []time.Duration{300 * time.Second, 300 * time.Second, 300 * time.Second, 5000 * time.Second}
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
		// a bucket holds the lateness in ms of one bit length: 300,000 ms
		// has 19, [262,144, 524,288); 5,000,000 ms has 23,
		// [4,194,304, 8,388,608)
		if st.Lateness.Counts[19] != 3 || st.Lateness.Counts[23] != 1 || st.Lateness.Total != 4 {
			t.Fatalf("lateness buckets = %v", st.Lateness.Counts)
		}
		if p50 := st.Lateness.P50; p50 != 524288*time.Millisecond {
			t.Errorf("p50 bound = %v, want 524.288s", p50)
		}
		if p99 := st.Lateness.P99; p99 != 8388608*time.Millisecond || st.Lateness.Max != p99 {
			t.Errorf("p99 bound = %v, want 2h19m48.608s", p99)
		}
		if (LatenessBuckets{}).percentile(99) != 0 {
			t.Error("empty histogram has a percentile")
		}
	})
}
