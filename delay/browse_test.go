package delay

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

func TestBrowse(t *testing.T) {
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
		ov, err := q.Browse(ctx, BrowseOptions{Tasks: 3})
		if err != nil {
			t.Fatal(err)
		}
		if ov.DueSoon != 2 {
			t.Errorf("DueSoon = %d, want 2", ov.DueSoon)
		}
		var keys []string
		for _, ti := range ov.Due {
			keys = append(keys, ti.Key)
			if ti.State != StatePending {
				t.Errorf("due task %s state %s", ti.Key, ti.State)
			}
		}
		if fmt.Sprint(keys) != "[k0 k1 k2]" {
			t.Errorf("due tasks %v, want the three soonest [k0 k1 k2]", keys)
		}
		if len(ov.Due) > 0 && !ov.Due[0].When.Before(ov.Due[1].When) {
			t.Errorf("due order: %v then %v", ov.Due[0].When, ov.Due[1].When)
		}
		if len(ov.InFlight) != 1 || ov.InFlight[0].Key != "taken" || ov.InFlight[0].Attempt != 1 ||
			!ov.InFlight[0].When.Equal(batch.Tasks[0].Deadline.Truncate(time.Millisecond)) {
			t.Errorf("in flight %+v, want taken, attempt 1, deadline %v", ov.InFlight, batch.Tasks[0].Deadline)
		}
		none, err := q.Browse(ctx, BrowseOptions{Tasks: -1, Horizon: time.Hour})
		if err != nil || len(none.Due)+len(none.InFlight) != 0 || none.DueSoon != 3 {
			t.Errorf("Browse(no tasks, 1h) = %+v, %v; want no lists and 3 due soon", none, err)
		}
		// An unreadable record is counted and left out, the rest still listed.
		if err := b.Client.HSet(ctx, q.k.taskBucket(ov.Due[0].ID), ov.Due[0].ID, "garbage").Err(); err != nil {
			t.Fatal(err)
		}
		bad, err := q.Browse(ctx, BrowseOptions{Tasks: 3})
		if err != nil || bad.Corrupt != 1 || len(bad.Due) != 2 || bad.Due[0].Key != "k1" {
			t.Errorf("Browse over a corrupt record = %+v, %v; want Corrupt 1 and [k1 k2]", bad, err)
		}
		if _, err := q.Browse(ctx, BrowseOptions{Tasks: MaxBatch + 1}); !errors.Is(err, &ValidationError{Field: "batch"}) {
			t.Errorf("Browse(MaxBatch+1) err %v, want invalid batch", err)
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
