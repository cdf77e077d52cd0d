package delay

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

// listAll pages through one state with o, returning the IDs in order and
// the pages it took.
func listAll(t *testing.T, q *Queue, o ListOptions) ([]string, int) {
	t.Helper()
	var ids []string
	pages := 0
	for {
		p, err := q.List(t.Context(), o)
		if err != nil {
			t.Fatalf("ListTasks(%+v): %v", o, err)
		}
		pages++
		for _, e := range p.Tasks {
			ids = append(ids, e.ID)
		}
		if p.Next == "" {
			return ids, pages
		}
		if pages > 1000 {
			t.Fatalf("ListTasks(%+v): no end after 1000 pages", o)
		}
		o.Cursor = p.Next
	}
}

func TestListTasks(t *testing.T) {
	t.Parallel()
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
		ctx := t.Context()
		q := newQ(t, b, Options{DoneTTL: time.Hour, Lease: time.Hour})
		now := time.Now()
		if b.Mini != nil {
			b.Mini.SetTime(now)
		}
		for i := range 30 { // due, a millisecond apart
			mustEnqueue(t, ctx, q, Job{Key: fmt.Sprintf("a-%02d", i), Token: "t", Payload: []byte(`{"n":1}`), When: At(now.Add(-time.Minute + time.Duration(i)*time.Millisecond))})
		}
		for i := range 10 {
			mustEnqueue(t, ctx, q, Job{Key: fmt.Sprintf("b-%02d", i), When: At(now.Add(time.Hour + time.Duration(i)*time.Second))})
		}
		// 9 taken in one script share one lease deadline: ties in inflight.
		batch := mustTake(t, ctx, q, 9)
		for i, tk := range batch.Tasks[:3] {
			if _, err := q.killTask(ctx, tk, fmt.Errorf("gateway said %d", 500+i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.ackTask(ctx, batch.Tasks[3]); err != nil {
			t.Fatal(err)
		}
		inflight := []string{}
		for _, tk := range batch.Tasks[4:] {
			inflight = append(inflight, tk.ID)
		}
		slices.Sort(inflight)

		for _, tc := range []struct {
			name  string
			o     ListOptions
			count int
		}{
			{"due by 7", ListOptions{State: StateDue, Limit: 7}, 21},
			{"due newest by 4", ListOptions{State: StateDue, Limit: 4, Newest: true}, 21},
			{"scheduled by 3", ListOptions{State: StateScheduled, Limit: 3}, 10},
			{"inflight ties by 2", ListOptions{State: StateInFlight, Limit: 2}, 5},
			{"inflight ties newest by 2", ListOptions{State: StateInFlight, Limit: 2, Newest: true}, 5},
			{"dead", ListOptions{State: StateDead}, 3},
			{"done", ListOptions{State: StateDone}, 1},
			{"key prefix", ListOptions{State: StateDue, KeyPrefix: "a-2", Limit: 4}, 10},
			{"error text", ListOptions{State: StateDead, ErrorText: "said 501"}, 1},
		} {
			ids, _ := listAll(t, q, tc.o)
			if len(ids) != tc.count {
				t.Errorf("%s: %d tasks %v, want %d", tc.name, len(ids), ids, tc.count)
			}
			if seen := map[string]bool{}; true {
				for _, id := range ids {
					if seen[id] {
						t.Errorf("%s: %s listed twice", tc.name, id)
					}
					seen[id] = true
				}
			}
			if tc.o.State == StateInFlight {
				got := slices.Clone(ids)
				if tc.o.Newest {
					slices.Reverse(got)
				}
				if !slices.Equal(got, inflight) {
					t.Errorf("%s: %v, want %v (ties by ID)", tc.name, ids, inflight)
				}
			}
		}
		// The order is the due order, and Newest is its reverse.
		up, _ := listAll(t, q, ListOptions{State: StateDue, Limit: 5})
		down, _ := listAll(t, q, ListOptions{State: StateDue, Limit: 6, Newest: true})
		slices.Reverse(down)
		if !slices.Equal(up, down) {
			t.Errorf("oldest first %v, newest first reversed %v", up, down)
		}
		// A filter that matches nothing stops at ScanLimit and says so.
		p, err := q.List(ctx, ListOptions{State: StateDue, KeyPrefix: "zz", ScanLimit: 8})
		if err != nil || !p.Bounded || p.Scanned != 8 || p.Next == "" || len(p.Tasks) != 0 {
			t.Errorf("bounded filter: %+v, %v", p, err)
		}
		p, err = q.List(ctx, ListOptions{State: StateDue, Limit: 1})
		if err != nil || p.Total != 21 || len(p.Tasks) != 1 || string(p.Tasks[0].Payload) != `{"n":1}` || p.Tasks[0].Key != "a-09" {
			t.Errorf("first due: %+v, %v", p, err)
		}
		// Task reads any state, with the fence of a task in flight.
		e, err := q.Task(ctx, batch.Tasks[4].ID)
		if err != nil || e.State != StateInFlight || e.Fence == 0 || e.Attempt != 1 || e.Key != batch.Tasks[4].Key {
			t.Errorf("Task in flight: %+v, %v", e, err)
		}
		e, err = q.Task(ctx, batch.Tasks[1].ID)
		if err != nil || e.State != StateDead || e.LastError != "gateway said 501" {
			t.Errorf("Task dead: %+v, %v", e, err)
		}
		if _, err := q.Task(ctx, "zzzz"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Task of an unknown ID: %v, want ErrNotFound", err)
		}
		for _, o := range []ListOptions{{State: "nope"}, {State: StateDue, Limit: MaxBatch + 1}, {State: StateDue, Cursor: "x"}} {
			if _, err := q.List(ctx, o); !errors.Is(err, &ValidationError{Field: "batch"}) {
				t.Errorf("ListTasks(%+v): %v, want invalid batch", o, err)
			}
		}
	})
}
