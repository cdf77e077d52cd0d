package delay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

// TestCancelIDsActsOnTheTaskNamed: CancelIDs removes a pending and a dead
// task, marks one in flight, and skips an ID whose task is gone even when
// the same key and token were enqueued again since (a new ID), an acked
// task's tombstone and a repeated ID.
func TestCancelIDsActsOnTheTaskNamed(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{DoneTTL: time.Hour}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		flying := mustEnqueue(t, ctx, q, Job{Key: "fly", Token: "1"})
		dying := mustEnqueue(t, ctx, q, Job{Key: "die", Token: "1"})
		acked := mustEnqueue(t, ctx, q, Job{Key: "ack", Token: "1"})
		batch := mustTake(t, ctx, q, 10)
		for _, tk := range batch.Tasks {
			var err error
			switch tk.ID {
			case dying.ID:
				_, err = q.killTask(ctx, tk, errors.New("boom"))
			case acked.ID:
				err = q.ackTask(ctx, tk)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		pending := mustEnqueue(t, ctx, q, Job{Key: "pend", Token: "1", When: After(time.Hour)})
		old := mustEnqueue(t, ctx, q, Job{Key: "again", Token: "1", When: After(time.Hour)})
		if _, err := q.Cancel(ctx, Selector{Key: "again", Token: "1"}); err != nil {
			t.Fatal(err)
		}
		again := mustEnqueue(t, ctx, q, Job{Key: "again", Token: "1", When: After(time.Hour)})
		if again.ID == old.ID || again.Duplicate {
			t.Fatalf("re-enqueue: %+v, want a new task", again)
		}
		res, err := q.Cancel(ctx, Selector{IDs: []string{pending.ID, flying.ID, dying.ID, old.ID, acked.ID, pending.ID}})
		if err != nil {
			t.Fatal(err)
		}
		if want := (CancelResult{Found: 3, Pending: 1, InFlight: 1, Dead: 1}); res != want {
			t.Errorf("CancelIDs = %+v, want %+v", res, want)
		}
		for key, n := range map[string]int{"pend": 0, "die": 0, "again": 1, "fly": 1} {
			tasks, err := lookup(ctx, q, key)
			if err != nil || len(tasks) != n {
				t.Errorf("Lookup(%s) = %+v, %v; want %d tasks", key, tasks, err, n)
			}
			if key == "again" && len(tasks) == 1 && (tasks[0].ID != again.ID || tasks[0].State != StatePending) {
				t.Errorf("the re-enqueued task was touched: %+v", tasks[0])
			}
			if key == "fly" && len(tasks) == 1 && tasks[0].State != StateCancelled {
				t.Errorf("the task in flight is %s, want cancelled", tasks[0].State)
			}
		}
		if res, err := q.Cancel(ctx, Selector{IDs: []string{flying.ID}}); err != nil || res.Already != 1 || res.Found != 0 {
			t.Errorf("second CancelIDs of the task in flight: %+v, %v", res, err)
		}
		if st, err := q.Stats(ctx); err != nil || st.Cancelled != 4 { // 3 here, 1 by CancelToken
			t.Errorf("Stats.Cancelled = %d, %v; want 4", st.Cancelled, err)
		}
	})
}

// TestRescheduleIDsActsOnTheTaskNamed: RescheduleIDs moves the pending
// tasks named, counts one in flight and one dead, and leaves alone a task
// enqueued with the key and token of a cancelled ID.
func TestRescheduleIDsActsOnTheTaskNamed(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		flying := mustEnqueue(t, ctx, q, Job{Key: "fly"})
		dying := mustEnqueue(t, ctx, q, Job{Key: "die"})
		batch := mustTake(t, ctx, q, 10)
		for _, tk := range batch.Tasks {
			if tk.ID == dying.ID {
				if _, err := q.killTask(ctx, tk, errors.New("boom")); err != nil {
					t.Fatal(err)
				}
			}
		}
		var moving []string
		for i := range 3 {
			moving = append(moving, mustEnqueue(t, ctx, q, Job{Key: fmt.Sprintf("m%d", i), When: After(time.Hour)}).ID)
		}
		old := mustEnqueue(t, ctx, q, Job{Key: "again", Token: "1", When: After(time.Hour)})
		if _, err := q.Cancel(ctx, Selector{Key: "again", Token: "1"}); err != nil {
			t.Fatal(err)
		}
		again := mustEnqueue(t, ctx, q, Job{Key: "again", Token: "1", When: After(time.Hour)})
		at := time.Now().Add(48 * time.Hour).Truncate(time.Millisecond)
		res, err := q.Reschedule(ctx, Selector{IDs: append(moving, flying.ID, dying.ID, old.ID, moving[0])}, At(at))
		if err != nil {
			t.Fatal(err)
		}
		if res.Moved != 3 || res.InFlight != 1 || res.Dead != 1 || !res.Due.Equal(at) {
			t.Errorf("RescheduleIDs = %+v, want 3 moved to %v, 1 in flight, 1 dead", res, at)
		}
		for _, id := range moving {
			if e, err := q.Task(ctx, id); err != nil || !e.When.Equal(at) {
				t.Errorf("task %s: %+v, %v; want due %v", id, e.When, err, at)
			}
		}
		if e, err := q.Task(ctx, again.ID); err != nil || e.When.After(time.Now().Add(2*time.Hour)) {
			t.Errorf("the re-enqueued task moved: %+v, %v", e, err)
		}
	})
}

// TestByIDInput: a malformed ID and none are an invalid selector, too
// many are ErrInvalid; nothing is sent for any of them.
func TestByIDInput(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		many := strings.Split(strings.Repeat("a,", MaxBatch+1), ",")[:MaxBatch+1]
		for _, tc := range []struct {
			ids  []string
			want error
		}{{[]string{""}, &ValidationError{Field: "selector"}}, {[]string{"1", strings.Repeat("z", 33)}, &ValidationError{Field: "selector"}}, {many, ErrInvalid}, {nil, &ValidationError{Field: "selector"}}} {
			if res, err := q.Cancel(ctx, Selector{IDs: tc.ids}); !errors.Is(err, tc.want) || res.Found != 0 {
				t.Errorf("Cancel(%d IDs) = %+v, %v; want %v", len(tc.ids), res, err, tc.want)
			}
			if res, err := q.Reschedule(ctx, Selector{IDs: tc.ids}, After(time.Minute)); !errors.Is(err, tc.want) || res.Moved != 0 {
				t.Errorf("Reschedule(%d IDs) = %+v, %v; want %v", len(tc.ids), res, err, tc.want)
			}
		}
	})
}
