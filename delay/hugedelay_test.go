package delay

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/score"
)

// TestHugeDelay: a delay past the codec's range, up to the largest
// Duration, is score.ErrOutOfRange (never a wrapped-around negative
// delay) and leaves the task where it was; RetryAfter with 0 or a
// negative delay retries now.
func TestHugeDelay(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		for _, d := range []time.Duration{math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64 - time.Millisecond + 2} {
			if _, err := q.Enqueue(ctx, Job{Key: "e", When: After(d)}); !errors.Is(err, score.ErrOutOfRange) {
				t.Errorf("Enqueue After(%d): %v, want score.ErrOutOfRange", d, err)
			}
		}
		for i, d := range []time.Duration{0, -time.Second, math.MaxInt64} {
			mustEnqueue(t, ctx, q, Job{Key: "k", Token: string(rune('a' + i))})
			tk := mustTake(t, ctx, q, 1).Tasks[0]
			var ra *retryAfterError
			if !errors.As(RetryAfter(d, errors.New("x")), &ra) {
				t.Fatalf("RetryAfter(%v) is no retryAfterError", d)
			}
			out, err := q.retryAfter(ctx, tk, ra.d, ra)
			switch {
			case d == math.MaxInt64 && !errors.Is(err, score.ErrOutOfRange):
				t.Errorf("RetryAfter(MaxInt64): %v %v, want score.ErrOutOfRange", out, err)
			case d != math.MaxInt64 && (err != nil || out != outcomeRetried):
				t.Errorf("RetryAfter(%v): %v %v, want retried", d, out, err)
			}
		}
		p, err := q.List(ctx, ListOptions{State: StateInFlight})
		if err != nil || p.Total != 1 {
			t.Errorf("in flight after the refused retry: %d %v, want 1", p.Total, err)
		}
	})
}
