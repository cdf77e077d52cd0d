package delay

import (
	"context"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

// TestListBoundsPastCodec: a From or To past the codec's range is a bound
// like any other (To there bounds nothing, From there selects nothing),
// not an error; From after To is an empty page.
func TestListBoundsPastCodec(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		mustEnqueue(t, ctx, q, Job{Key: "a", When: After(time.Hour)})
		now, past := time.Now(), q.o.Codec.MaxTime().Add(time.Hour)
		for _, c := range []struct {
			name  string
			o     ListOptions
			total int64
		}{
			{"to past the codec", ListOptions{State: StateScheduled, To: past}, 1},
			{"pending to past the codec", ListOptions{State: StatePending, From: now, To: past}, 1},
			{"from past the codec", ListOptions{State: StateScheduled, From: past}, 0},
			{"from past the codec, newest", ListOptions{State: StatePending, From: past, Newest: true}, 0},
			{"from after to", ListOptions{State: StateScheduled, From: now.Add(2 * time.Hour), To: now}, 0},
			{"within", ListOptions{State: StateScheduled, From: now, To: now.Add(2 * time.Hour)}, 1},
		} {
			p, err := q.List(ctx, c.o)
			if err != nil || p.Total != c.total || len(p.Tasks) != int(c.total) {
				t.Errorf("%s: total %d, %d tasks, %v; want %d", c.name, p.Total, len(p.Tasks), err, c.total)
			}
		}
	})
}
