package delay

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

// TestListKeyTotal: by Key, Page.Total counts the tasks in the State
// asked for (before KeyPrefix and ErrorText), as it does by State.
func TestListKeyTotal(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		mustEnqueue(t, ctx, q, Job{Key: "k", Token: "dead"})
		tk := mustTake(t, ctx, q, 1).Tasks[0]
		if _, err := q.killTask(ctx, tk, errors.New("boom")); err != nil {
			t.Fatal(err)
		}
		mustEnqueue(t, ctx, q, Job{Key: "k", Token: "later", When: After(time.Hour)})
		for _, c := range []struct {
			o            ListOptions
			total, tasks int
		}{
			{ListOptions{Key: "k"}, 2, 2},
			{ListOptions{Key: "k", State: StateDead}, 1, 1},
			{ListOptions{Key: "k", State: StateScheduled}, 1, 1},
			{ListOptions{Key: "k", State: StateInFlight}, 0, 0},
			{ListOptions{Key: "k", ErrorText: "boom"}, 2, 1},
			{ListOptions{Key: "k", State: StatePending, KeyPrefix: "x"}, 1, 0},
		} {
			p, err := q.List(ctx, c.o)
			if err != nil {
				t.Fatalf("%+v: %v", c.o, err)
			}
			if p.Total != int64(c.total) || len(p.Tasks) != c.tasks {
				t.Errorf("%+v: Total %d, %d tasks; want %d, %d", c.o, p.Total, len(p.Tasks), c.total, c.tasks)
			}
		}
	})
}

// TestSelectorBadInput: every malformed selector is a *ValidationError
// naming "selector" or "batch", and writes nothing.
func TestSelectorBadInput(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		mustEnqueue(t, ctx, q, Job{Key: "k", When: After(time.Hour)})
		before := snapshot(t, ctx, b)
		many := make([]string, MaxBatch+1)
		for i := range many {
			many[i] = "1"
		}
		rows := []struct {
			name  string
			call  func() error
			field string
		}{
			{"purge by key", func() error { _, err := q.Purge(ctx, Selector{Key: "k"}); return err }, "selector"},
			{"purge empty", func() error { _, err := q.Purge(ctx, Selector{}); return err }, "selector"},
			{"purge token only", func() error { _, err := q.Purge(ctx, Selector{Token: "t"}); return err }, "selector"},
			{"purge all and token", func() error { _, err := q.Purge(ctx, Selector{All: true, Token: "t"}); return err }, "selector"},
			{"requeue all", func() error { _, err := q.Requeue(ctx, Selector{All: true}); return err }, "selector"},
			{"requeue empty", func() error { _, err := q.Requeue(ctx, Selector{IDs: []string{}}); return err }, "selector"},
			{"reschedule all", func() error { _, err := q.Reschedule(ctx, Selector{All: true}, After(time.Minute)); return err }, "selector"},
			{"reschedule ids and token", func() error {
				_, err := q.Reschedule(ctx, Selector{IDs: []string{"1"}, Token: "t"}, After(time.Minute))
				return err
			}, "selector"},
			{"cancel too many ids", func() error { _, err := q.Cancel(ctx, Selector{IDs: many}); return err }, "batch"},
			{"purge too many ids", func() error { _, err := q.Purge(ctx, Selector{IDs: many}); return err }, "batch"},
			{"reschedule too many ids", func() error { _, err := q.Reschedule(ctx, Selector{IDs: many}, After(time.Minute)); return err }, "batch"},
			{"cancel empty ID", func() error { _, err := q.Cancel(ctx, Selector{IDs: []string{"1", ""}}); return err }, "selector"},
			{"purge long ID", func() error { _, err := q.Purge(ctx, Selector{IDs: []string{strings.Repeat("9", 33)}}); return err }, "selector"},
			{"requeue empty ID", func() error { _, err := q.Requeue(ctx, Selector{IDs: []string{""}}); return err }, "selector"},
			{"reschedule long ID", func() error {
				_, err := q.Reschedule(ctx, Selector{IDs: []string{strings.Repeat("9", 33)}}, After(time.Minute))
				return err
			}, "selector"},
			{"cancel key with ctrl", func() error { _, err := q.Cancel(ctx, Selector{Key: "a\x01"}); return err }, "key"},
			{"list key with cursor", func() error { _, err := q.List(ctx, ListOptions{Key: "k", Cursor: "1:1"}); return err }, "batch"},
			{"list key with newest", func() error { _, err := q.List(ctx, ListOptions{Key: "k", Newest: true}); return err }, "batch"},
			{"list key with limit", func() error { _, err := q.List(ctx, ListOptions{Key: "k", Limit: 5}); return err }, "batch"},
			{"list key with to", func() error { _, err := q.List(ctx, ListOptions{Key: "k", To: time.Now()}); return err }, "batch"},
			{"list no state", func() error { _, err := q.List(ctx, ListOptions{}); return err }, "batch"},
			{"list bad state", func() error { _, err := q.List(ctx, ListOptions{State: "nope"}); return err }, "batch"},
			{"list negative limit", func() error { _, err := q.List(ctx, ListOptions{State: StateDue, Limit: -1}); return err }, "batch"},
			{"list limit over max", func() error { _, err := q.List(ctx, ListOptions{State: StateDue, Limit: MaxBatch + 1}); return err }, "batch"},
			{"list garbage cursor", func() error { _, err := q.List(ctx, ListOptions{State: StateDue, Cursor: "garbage"}); return err }, "batch"},
			{"list cursor no id", func() error { _, err := q.List(ctx, ListOptions{State: StateDue, Cursor: "12:"}); return err }, "batch"},
			{"list cursor NaN", func() error { _, err := q.List(ctx, ListOptions{State: StateDue, Cursor: "NaN:1"}); return err }, "batch"},
			{"list key with bad state", func() error { _, err := q.List(ctx, ListOptions{Key: "k", State: "x"}); return err }, "batch"},
			{"list negative scan limit", func() error {
				_, err := q.List(ctx, ListOptions{State: StateDue, KeyPrefix: "k", ScanLimit: -1})
				return err
			}, "batch"},
		}
		for _, r := range rows {
			err := r.call()
			var ve *ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, &ValidationError{Field: r.field}) || !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: %v, want a *ValidationError on %q", r.name, err, r.field)
			}
		}
		if after := snapshot(t, ctx, b); after != before {
			t.Errorf("a refused call wrote:\nbefore %s\nafter %s", before, after)
		}
	})
}

// TestSelectorIDs: by ID, an ID that names no task, a duplicate and an
// ID of another queue are skipped, counted nowhere.
func TestSelectorIDs(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		e := mustEnqueue(t, ctx, q, Job{Key: "k", When: After(time.Hour)})
		r, err := q.Reschedule(ctx, Selector{IDs: []string{e.ID, e.ID, "99999", "zz:z"}}, After(2*time.Hour))
		if err != nil || r.Moved != 1 {
			t.Fatalf("reschedule dup IDs: %+v %v, want 1 moved", r, err)
		}
		c, err := q.Cancel(ctx, Selector{IDs: []string{e.ID, e.ID, "99999"}})
		if err != nil || c.Found != 1 || c.Pending != 1 {
			t.Fatalf("cancel dup IDs: %+v %v, want 1 pending", c, err)
		}
		n, err := q.Purge(ctx, Selector{IDs: []string{e.ID, "nosuch"}})
		if err != nil || n != 0 {
			t.Fatalf("purge gone IDs: %d %v", n, err)
		}
		n, err = q.Requeue(ctx, Selector{IDs: []string{e.ID, strings.Repeat("9", 32)}})
		if err != nil || n != 0 {
			t.Fatalf("requeue gone IDs: %d %v", n, err)
		}
	})
}
