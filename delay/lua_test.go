package delay

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/score"
)

// Lua computes scores in doubles; near 2^53 they must still be exact and
// equal to score.TimeCodec's, and the spill past the codec's last ms must be
// refused. Real Redis only: its Lua number formatting is what matters.
func TestLuaScoreArithmeticNear2p53(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		// epoch chosen so that the codec's last ms is one minute from now
		codec0 := score.DefaultTimeCodec()
		epoch := time.Now().Add(time.Minute).Add(-time.Duration(codec0.MaxMs()) * time.Millisecond)
		codec, err := score.NewTimeCodec(epoch, 10)
		if err != nil {
			t.Fatal(err)
		}
		q := newQ(t, b, Options{Codec: codec})
		last := codec.MaxTime()
		for seq := int64(0); seq < 3; seq++ {
			e := mustEnqueue(t, ctx, q, Job{Key: "edge", When: At(last)})
			want, err := codec.Encode(last.UnixMilli(), seq)
			if err != nil {
				t.Fatal(err)
			}
			got, err := b.Client.ZScore(ctx, q.k.due, e.ID).Result()
			if err != nil {
				t.Fatal(err)
			}
			s, err := score.ParseFloat(got)
			if err != nil || s != want || e.Seq != seq || !e.Due.Equal(time.UnixMilli(last.UnixMilli())) {
				t.Fatalf("seq %d: stored %v (%d, %v), want %d; enqueued %+v", seq, got, s, err, want, e)
			}
			if s > score.MaxExact {
				t.Fatalf("score %d above 2^53", s)
			}
		}
		// fill the last ms: the 1025th would spill past MaxTime and is refused
		jobs := make([]Job, 1021)
		for i := range jobs { // at most maxTasksPerKey tokens per business key
			jobs[i] = Job{Key: "fill:" + strconv.Itoa(i/60), Token: "t" + strconv.Itoa(i), When: At(last)}
		}
		mustEnqueueBatch(t, ctx, q, jobs)
		before := snapshot(t, ctx, b)
		if _, err := q.Enqueue(ctx, Job{Key: "spill", When: At(last)}); !errors.Is(err, score.ErrOutOfRange) {
			t.Fatalf("spill past MaxTime: %v, want ErrOutOfRange", err)
		}
		if snapshot(t, ctx, b) != before {
			t.Fatal("refused spill wrote something")
		}
	})
}
