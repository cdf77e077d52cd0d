package delay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

// sliceSource is a Source over a slice, paged by index.
type sliceSource struct {
	tasks []Job
	pages int
}

func (s *sliceSource) Pending(_ context.Context, before time.Time, cursor string, limit int) ([]Job, string, error) {
	s.pages++
	start := 0
	if cursor != "" {
		start, _ = strconv.Atoi(cursor)
	}
	var out []Job
	i := start
	for ; i < len(s.tasks) && len(out) < limit; i++ {
		if s.tasks[i].At.Before(before) {
			out = append(out, s.tasks[i])
		}
	}
	if i >= len(s.tasks) {
		return out, "", nil
	}
	return out, strconv.Itoa(i), nil
}

// Reconcile from the source of truth re-adds what Redis lacks and removes
// what the source lacks.
func TestReconcile(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		now := time.Now()
		var src sliceSource
		for i := range 250 {
			src.tasks = append(src.tasks, Job{Key: fmt.Sprintf("o:%d", i), Token: "expire", When: At(now.Add(time.Duration(i) * time.Second)), Payload: []byte("p")})
		}
		// Redis has the first 100, plus 30 the source no longer has, plus one untracked (generated token)
		// and one far after the bound.
		for _, st := range src.tasks[:100] {
			mustEnqueue(t, ctx, q, Job{Key: st.Key, Token: st.Token, Payload: st.Payload, When: At(st.At)})
		}
		for i := range 30 {
			mustEnqueue(t, ctx, q, Job{Key: fmt.Sprintf("gone:%d", i), Token: "expire", When: At(now.Add(time.Minute))})
		}
		mustEnqueue(t, ctx, q, Job{Key: "untracked", When: At(now)})
		mustEnqueue(t, ctx, q, Job{Key: "later", Token: "x", When: At(now.Add(48 * time.Hour))})
		before := now.Add(24 * time.Hour)
		res, err := q.Reconcile(ctx, &src, before, ReconcileOptions{PageSize: 40})
		if err != nil {
			t.Fatal(err)
		}
		want := ReconcileResult{Listed: 250, Added: 150, Present: 100, Removed: 30, Untracked: 1}
		if res != want {
			t.Fatalf("reconcile = %+v, want %+v", res, want)
		}
		if src.pages < 7 {
			t.Fatalf("source read in %d pages", src.pages)
		}
		// now Redis has exactly the source + untracked + later
		ids, _ := b.Client.ZRange(ctx, q.k.due, 0, -1).Result()
		if len(ids) != 252 {
			t.Fatalf("due set has %d", len(ids))
		}
		for _, st := range src.tasks {
			infos, err := lookup(ctx, q, st.Key)
			if err != nil || len(infos) != 1 || infos[0].Token != "expire" {
				t.Fatalf("%s: %+v %v", st.Key, infos, err)
			}
			if want := time.UnixMilli(st.At.UnixMilli() + 1); infos[0].When.After(want) {
				t.Fatalf("%s due %v, source %v", st.Key, infos[0].When, st.At)
			}
		}
		// idempotent: a second run changes nothing
		res2, err := q.Reconcile(ctx, &src, before, ReconcileOptions{})
		if err != nil || res2 != (ReconcileResult{Listed: 250, Present: 250, Untracked: 1}) {
			t.Fatalf("second reconcile = %+v %v", res2, err)
		}
	})
}

// countingSource enqueues a task the source will list only on its next
// pass, after its last page is read: as a relay or a producer does while
// Reconcile runs.
type countingSource struct {
	sliceSource
	late func()
}

func (s *countingSource) Pending(ctx context.Context, before time.Time, cursor string, limit int) ([]Job, string, error) {
	out, next, err := s.sliceSource.Pending(ctx, before, cursor, limit)
	if next == "" && s.late != nil {
		s.late()
		s.late = nil
	}
	return out, next, err
}

// TestReconcileKeepsTasksEnqueuedMeanwhile: a task enqueued after the
// listing began is never removed as one the source dropped.
func TestReconcileKeepsTasksEnqueuedMeanwhile(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, _ *testredis.Backend, q *Queue) {
		now := time.Now()
		mustEnqueue(t, ctx, q, Job{Key: "gone", Token: "t", When: At(now.Add(time.Minute))})
		src := &countingSource{sliceSource: sliceSource{tasks: []Job{{Key: "kept", Token: "t", When: At(now.Add(time.Minute))}}}}
		src.late = func() { mustEnqueue(t, ctx, q, Job{Key: "late", Token: "t", When: At(now.Add(time.Minute))}) }
		res, err := q.Reconcile(ctx, src, now.Add(time.Hour), ReconcileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := ReconcileResult{Listed: 1, Added: 1, Removed: 1, Newer: 1}
		if res != want {
			t.Fatalf("reconcile = %+v, want %+v", res, want)
		}
		for key, n := range map[string]int{"gone": 0, "kept": 1, "late": 1} {
			if infos, err := lookup(ctx, q, key); err != nil || len(infos) != n {
				t.Errorf("%s: %d tasks (%v), want %d", key, len(infos), err, n)
			}
		}
	})
}

// TestReconcileMoveDue: with MoveDue, a present task never delivered is
// moved to the source's due time; a delivered (retried) one keeps its
// retry's time; without it nothing present moves.
func TestReconcileMoveDue(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, _ *testredis.Backend, q *Queue) {
		now := time.Now().Truncate(time.Millisecond)
		src := sliceSource{tasks: []Job{
			{Key: "drifted", Token: "t", When: At(now.Add(time.Hour))},
			{Key: "same", Token: "t", When: At(now.Add(time.Hour))},
			{Key: "retried", Token: "t", When: At(now.Add(-time.Second))},
		}}
		mustEnqueue(t, ctx, q, Job{Key: "drifted", Token: "t", When: At(now.Add(3 * time.Hour))})
		mustEnqueue(t, ctx, q, Job{Key: "same", Token: "t", When: At(now.Add(time.Hour))})
		mustEnqueue(t, ctx, q, Job{Key: "retried", Token: "t", When: At(now.Add(-time.Second))})
		bt, err := q.takeN(ctx, 1)
		if err != nil || len(bt.Tasks) != 1 {
			t.Fatalf("Take = %+v, %v", bt, err)
		}
		if _, err := q.retryAfter(ctx, bt.Tasks[0], 2*time.Hour, fmt.Errorf("boom")); err != nil {
			t.Fatal(err)
		}
		due := func(key string) time.Time {
			t.Helper()
			infos, err := lookup(ctx, q, key)
			if err != nil || len(infos) != 1 {
				t.Fatalf("Lookup(%s) = %+v, %v", key, infos, err)
			}
			return infos[0].When
		}
		retryDue := due("retried")
		tests := []struct {
			name      string
			move      bool
			wantMoved int
			drifted   time.Time
		}{
			{"without MoveDue", false, 0, now.Add(3 * time.Hour)},
			{"with MoveDue", true, 1, now.Add(time.Hour)},
			{"again", true, 0, now.Add(time.Hour)},
		}
		for _, tt := range tests {
			res, err := q.Reconcile(ctx, &src, now.Add(24*time.Hour), ReconcileOptions{MoveDue: tt.move})
			if err != nil || res.Moved != tt.wantMoved || res.Present != 3 {
				t.Fatalf("%s: Reconcile = %+v, %v; want %d moved of 3 present", tt.name, res, err, tt.wantMoved)
			}
			if got := due("drifted"); !got.Equal(tt.drifted) {
				t.Fatalf("%s: drifted due %v, want %v", tt.name, got, tt.drifted)
			}
			if got := due("retried"); !got.Equal(retryDue) {
				t.Fatalf("%s: retried due %v, want its retry's %v", tt.name, got, retryDue)
			}
		}
	})
}

// TestReconcileRefusesBadSourceJobs: a source job without a token, or
// with a relative due time, is counted Invalid (the first one's typed
// error in FirstInvalid) and never enqueued; the valid ones are.
func TestReconcileRefusesBadSourceJobs(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, _ *testredis.Backend, q *Queue) {
		now := time.Now().Truncate(time.Millisecond)
		for _, tc := range []struct {
			name  string
			bad   Job
			field string
		}{
			{"no token", Job{Key: "a", When: At(now.Add(time.Minute))}, "token"},
			{"relative time", Job{Key: "b", Token: "t", When: After(time.Minute)}, "when"},
		} {
			src := sliceSource{tasks: []Job{tc.bad, {Key: "ok-" + tc.field, Token: "t", When: At(now.Add(time.Minute))}}}
			res, err := q.Reconcile(ctx, &src, now.Add(time.Hour), ReconcileOptions{KeepExtra: true})
			if err != nil || res.Invalid != 1 || res.Added != 1 || !errors.Is(res.FirstInvalid, &ValidationError{Field: tc.field}) {
				t.Errorf("%s: Reconcile = %+v, %v; want 1 invalid (%s), 1 added", tc.name, res, err, tc.field)
			}
			if infos, err := lookup(ctx, q, tc.bad.Key); err != nil || len(infos) != 0 {
				t.Errorf("%s: the bad job was enqueued: %+v, %v", tc.name, infos, err)
			}
		}
	})
}
