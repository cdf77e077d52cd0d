package delay

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/tierset/tierset/internal/testredis"
)

// A take that asks for every ID a tasks bucket can hold reads the bucket
// whole (get_recs in lib.lua) and matches its records in step, by field
// past a mismatch: each way the records can lie there must hand out each
// task's own record, and a record gone must still count as lost.
func TestTakeWholeBuckets(t *testing.T) {
	t.Parallel()
	const n = 3 * 36 // two whole buckets at least, whatever the first ID
	cases := []struct {
		name string
		// alter changes the records of the whole bucket full (its IDs in
		// order) before the take; it returns the IDs whose record is gone.
		alter func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue, full []string) []string
	}{
		{"in order", func(*testing.T, context.Context, *testredis.Backend, *Queue, []string) []string { return nil }},
		{"first and a middle record put back last", func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue, full []string) []string {
			t.Helper()
			for _, id := range []string{full[0], full[17]} {
				bk := q.k.taskBucket(id)
				rec, err := b.Client.HGet(ctx, bk, id).Result()
				if err != nil {
					t.Fatal(err)
				}
				// HSET appends a new field: the bucket's order is no longer ID order
				if err := b.Client.HDel(ctx, bk, id).Err(); err != nil {
					t.Fatal(err)
				}
				if err := b.Client.HSet(ctx, bk, id, rec).Err(); err != nil {
					t.Fatal(err)
				}
			}
			return nil
		}},
		{"a record gone", dropRecord(5)},
		{"the last record gone", dropRecord(35)},
	}
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		for ci, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				q := namedQ(t, b, fmt.Sprintf("whole%d", ci), Options{})
				jobs := jobsOf(n, func(i int) Job {
					return Job{Key: fmt.Sprintf("k%d", i), Payload: []byte(fmt.Sprintf("p%d", i))}
				})
				res := mustEnqueueBatch(t, ctx, q, jobs)
				byID := map[string]int{}
				perBucket := map[string][]string{}
				for i, r := range res {
					byID[r.ID] = i
					bk := q.k.taskBucket(r.ID)
					perBucket[bk] = append(perBucket[bk], r.ID)
				}
				var full []string
				for _, r := range res {
					if ids := perBucket[q.k.taskBucket(r.ID)]; len(ids) == 36 {
						full = ids
						break
					}
				}
				if full == nil {
					t.Fatalf("no whole bucket among %d consecutive IDs", n)
				}
				gone := tc.alter(t, ctx, b, q, full)
				bt, err := q.takeN(ctx, n)
				if len(gone) == 0 && err != nil {
					t.Fatalf("Take: %v", err)
				}
				if len(gone) > 0 && !errors.Is(err, ErrRecordLost) {
					t.Fatalf("Take: %v, want ErrRecordLost", err)
				}
				if bt.Lost != len(gone) || len(bt.Tasks) != n-len(gone) {
					t.Fatalf("took %d, lost %d; want %d, %d", len(bt.Tasks), bt.Lost, n-len(gone), len(gone))
				}
				for _, tk := range bt.Tasks {
					i, ok := byID[tk.ID]
					if !ok || tk.Key != jobs[i].Key || string(tk.Payload) != string(jobs[i].Payload) {
						t.Errorf("task %s: key %q payload %q, want job %d", tk.ID, tk.Key, tk.Payload, i)
					}
				}
			})
		}
	})
}

// dropRecord is an alter of TestTakeWholeBuckets that deletes the record
// of the bucket's at-th ID.
func dropRecord(at int) func(*testing.T, context.Context, *testredis.Backend, *Queue, []string) []string {
	return func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue, full []string) []string {
		t.Helper()
		if err := b.Client.HDel(ctx, q.k.taskBucket(full[at]), full[at]).Err(); err != nil {
			t.Fatal(err)
		}
		return full[at : at+1]
	}
}
