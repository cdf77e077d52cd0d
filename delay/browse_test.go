package delay

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

// TestListOverview: what an operator looks at first, through List: the
// tasks due now (oldest first), the ones due within a horizon (a due
// range's Total), the oldest leases; a corrupt record is listed with its
// error, the rest still listed.
func TestListOverview(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		now := q.ServerNow()
		if b.Mini != nil {
			now = time.Now()
			setTime(b, now)
		}
		// Overdue by 3 s and 1 s, due in 10 s and 30 s (soon), in 2 min (not soon).
		for i, d := range []time.Duration{-3 * time.Second, -time.Second, 10 * time.Second, 30 * time.Second, 2 * time.Minute} {
			mustEnqueue(t, ctx, q, Job{Key: fmt.Sprintf("k%d", i), When: At(now.Add(d))})
		}
		mustEnqueue(t, ctx, q, Job{Key: "taken", When: At(now.Add(-5 * time.Second))})
		batch := mustTake(t, ctx, q, 1)
		if len(batch.Tasks) != 1 || batch.Tasks[0].Key != "taken" {
			t.Fatalf("take: %+v", batch.Tasks)
		}
		due, err := q.List(ctx, ListOptions{State: StateDue, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, ti := range due.Tasks {
			keys = append(keys, ti.Key)
			if ti.State != StateDue {
				t.Errorf("due task %s state %s", ti.Key, ti.State)
			}
		}
		if fmt.Sprint(keys) != "[k0 k1]" || due.Total != 2 {
			t.Errorf("due tasks %v (total %d), want the two overdue [k0 k1]", keys, due.Total)
		}
		if len(due.Tasks) == 2 && !due.Tasks[0].When.Before(due.Tasks[1].When) {
			t.Errorf("due order: %v then %v", due.Tasks[0].When, due.Tasks[1].When)
		}
		soon, err := q.List(ctx, ListOptions{State: StateScheduled, To: now.Add(time.Minute), Limit: 3})
		if err != nil || soon.Total != 2 || len(soon.Tasks) != 2 || soon.Tasks[0].Key != "k2" || soon.Tasks[0].State != StateScheduled {
			t.Errorf("due within a minute = %+v, %v; want 2, k2 first, scheduled", soon, err)
		}
		if hour, err := q.List(ctx, ListOptions{State: StateScheduled, To: now.Add(time.Hour)}); err != nil || hour.Total != 3 {
			t.Errorf("due within an hour: total %d, %v; want 3", hour.Total, err)
		}
		if later, err := q.List(ctx, ListOptions{State: StatePending, From: now.Add(time.Minute)}); err != nil || later.Total != 1 || later.Tasks[0].Key != "k4" {
			t.Errorf("pending from a minute on = %+v, %v; want k4 alone", later, err)
		}
		fl, err := q.List(ctx, ListOptions{State: StateInFlight})
		if err != nil || len(fl.Tasks) != 1 || fl.Tasks[0].Key != "taken" || fl.Tasks[0].Attempt != 1 ||
			!fl.Tasks[0].When.Equal(batch.Tasks[0].Deadline.Truncate(time.Millisecond)) || fl.Tasks[0].Fence != batch.Tasks[0].Fence {
			t.Errorf("in flight %+v, %v; want taken, attempt 1, deadline %v", fl.Tasks, err, batch.Tasks[0].Deadline)
		}
		// An unreadable record is listed with its error, the rest still listed.
		if err := b.Client.HSet(ctx, q.k.taskBucket(due.Tasks[0].ID), due.Tasks[0].ID, "garbage").Err(); err != nil {
			t.Fatal(err)
		}
		bad, err := q.List(ctx, ListOptions{State: StatePending, Limit: 3})
		if err != nil || len(bad.Tasks) != 3 || !errors.Is(bad.Tasks[0].Err, ErrCorrupt) || bad.Tasks[1].Key != "k1" || bad.Tasks[1].Err != nil {
			t.Errorf("List over a corrupt record = %+v, %v; want it first with ErrCorrupt, then k1", bad, err)
		}
		if _, err := q.List(ctx, ListOptions{State: StateDue, Limit: MaxBatch + 1}); !errors.Is(err, &ValidationError{Field: "batch"}) {
			t.Errorf("List(MaxBatch+1) err %v, want invalid batch", err)
		}
		if _, err := q.List(ctx, ListOptions{}); !errors.Is(err, &ValidationError{Field: "batch"}) {
			t.Errorf("List without a state or key: err %v, want invalid batch", err)
		}
	})
}

func TestDiscover(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		for _, name := range []string{"zeta", "alpha", "orders:1"} {
			q, err := New(b.Client, name, Options{Prefix: b.Prefix})
			if err != nil {
				t.Fatal(err)
			}
			mustEnqueue(t, ctx, q, Job{Key: "k", When: After(time.Hour)})
		}
		names, err := Discover(ctx, b.Client, b.Prefix)
		if err != nil || fmt.Sprint(names) != "[alpha orders:1 zeta]" {
			t.Errorf("Discover = %v, %v; want [alpha orders:1 zeta]", names, err)
		}
		if _, err := Discover(ctx, b.Client, "a*b"); !errors.Is(err, &ValidationError{Field: "prefix"}) {
			t.Errorf("Discover(glob prefix) err %v, want invalid prefix", err)
		}
	})
}
