package delay

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tierset/tierset/internal/testredis"
)

// lookupTokens is the sorted "token=state" list Lookup gives for key.
func lookupTokens(t *testing.T, ctx context.Context, q *Queue, key string) string {
	t.Helper()
	infos, err := q.Lookup(ctx, key)
	if err != nil {
		t.Fatalf("Lookup(%q): %v", key, err)
	}
	var out []string
	for _, in := range infos {
		out = append(out, in.Token+"="+string(in.State))
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// The index entry of a key must list exactly its live tasks whichever way
// they came and went. F_SOLE lets ack delete an entry without reading it,
// so each step that gives a key a second task must clear the mark of the
// first: these sequences are the ways to get that wrong.
func TestIndexFollowsTasks(t *testing.T) {
	type step struct {
		op    string // enqueue, batch (two jobs in one call), take, ack, cancel
		token string
		want  string // Lookup after the step
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"one task acked", []step{
			{"enqueue", "a", "a=pending"}, {"take", "a", "a=inflight"}, {"ack", "a", ""},
		}},
		{"second task while the first is pending", []step{
			{"enqueue", "a", "a=pending"}, {"enqueue", "b", "a=pending,b=pending"},
			{"take", "a", "a=inflight,b=pending"}, {"ack", "a", "b=pending"},
			{"take", "b", "b=inflight"}, {"ack", "b", ""},
		}},
		{"second task while the first is in flight", []step{
			{"enqueue", "a", "a=pending"}, {"take", "a", "a=inflight"},
			{"enqueue", "b", "a=inflight,b=pending"}, {"ack", "a", "b=pending"},
			{"take", "b", "b=inflight"}, {"ack", "b", ""},
		}},
		{"two tasks in one batch", []step{
			{"batch", "a", "a=pending,b=pending"}, {"take", "a", "a=inflight,b=pending"},
			{"ack", "a", "b=pending"}, {"take", "b", "b=inflight"}, {"ack", "b", ""},
		}},
		{"batch second task next to an existing one", []step{
			{"enqueue", "x", "x=pending"}, {"batch", "a", "a=pending,b=pending,x=pending"},
			{"take", "x", "a=pending,b=pending,x=inflight"}, {"ack", "x", "a=pending,b=pending"},
		}},
		{"cancel one of two, ack the other", []step{
			{"enqueue", "a", "a=pending"}, {"enqueue", "b", "a=pending,b=pending"},
			{"cancel", "b", "a=pending"}, {"take", "a", "a=inflight"}, {"ack", "a", ""},
		}},
		{"a task after the only one is gone", []step{
			{"enqueue", "a", "a=pending"}, {"take", "a", "a=inflight"}, {"ack", "a", ""},
			{"enqueue", "b", "b=pending"}, {"take", "b", "b=inflight"}, {"ack", "b", ""},
		}},
	}
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
		for ci, tc := range cases {
			// one bucket: every key shares it, as keys of a large queue share theirs
			for _, nib := range []int{DefaultIndexBuckets, 1} {
				t.Run(fmt.Sprintf("%s/buckets=%d", tc.name, nib), func(t *testing.T) {
					ctx := testCtx(t)
					q, err := New(b.Client, fmt.Sprintf("idx%d-%d", ci, nib), Options{Prefix: b.Prefix, IndexBuckets: nib})
					if err != nil {
						t.Fatal(err)
					}
					const key = "order:42"
					held := map[string]*Task{}
					for si, s := range tc.steps {
						switch s.op {
						case "enqueue":
							mustEnqueue(t, ctx, q, Job{Key: key, Token: s.token})
						case "batch":
							res, err := q.EnqueueBatch(ctx, []Job{{Key: key, Token: "a"}, {Key: key, Token: "b"}})
							if err != nil || res[0].Err != nil || res[1].Err != nil {
								t.Fatalf("step %d: batch %v %+v", si, err, res)
							}
						case "take":
							bt := mustTake(t, ctx, q, 1)
							if len(bt.Tasks) != 1 || bt.Tasks[0].Token != s.token {
								t.Fatalf("step %d: took %+v, want token %s", si, bt.Tasks, s.token)
							}
							held[s.token] = bt.Tasks[0]
						case "ack":
							if err := q.Ack(ctx, held[s.token].Lease); err != nil {
								t.Fatalf("step %d: ack: %v", si, err)
							}
						case "cancel":
							if _, err := q.CancelToken(ctx, key, s.token); err != nil {
								t.Fatalf("step %d: cancel: %v", si, err)
							}
						}
						if got := lookupTokens(t, ctx, q, key); got != s.want {
							t.Fatalf("step %d (%s %s): Lookup %q, want %q", si, s.op, s.token, got, s.want)
						}
					}
					if tc.steps[len(tc.steps)-1].want != "" {
						return
					}
					// nothing of the key is left: no index entry, no record
					for _, base := range []string{q.k.idx, q.k.tasks} {
						if n, err := testredis.CountKeys(ctx, b.Client, base+":"); err != nil || n != 0 {
							t.Fatalf("%d keys left under %s: (%v)", n, base, err)
						}
					}
				})
			}
		}
	})
}

// On real Redis the bucket hashes are listpack-encoded (what the memory
// figure rests on), each record is where taskBucket says, and in a cluster
// every bucket is on the queue's slot.
func TestBucketLayout(t *testing.T) {
	testredis.EachReal(t, func(t *testing.T, b *testredis.Backend) {
		ctx := testCtx(t)
		q := newQ(t, b, Options{})
		jobs := make([]Job, 300)
		for i := range jobs {
			jobs[i] = Job{Key: fmt.Sprintf("order:2026-12-01:%08d", i), Payload: []byte("0123456789abcdef")}
		}
		res, err := q.EnqueueBatch(ctx, jobs)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			if ok, err := b.Client.HExists(ctx, q.k.taskBucket(r.ID), r.ID).Result(); err != nil || !ok {
				t.Fatalf("record of %s not in %s (%v)", r.ID, q.k.taskBucket(r.ID), err)
			}
		}
		for _, j := range jobs {
			if ok, err := b.Client.HExists(ctx, q.k.indexBucket(j.Key), j.Key).Result(); err != nil || !ok {
				t.Fatalf("index entry of %s not in %s (%v)", j.Key, q.k.indexBucket(j.Key), err)
			}
		}
		slot := int64(-1)
		for _, base := range []string{q.k.tasks, q.k.idx} {
			names, err := testredis.Keys(ctx, b.Client, base+":")
			if err != nil || len(names) == 0 {
				t.Fatalf("no buckets under %s (%v)", base, err)
			}
			for _, name := range names {
				enc, err := b.Client.ObjectEncoding(ctx, name).Result()
				if err != nil || enc != "listpack" {
					t.Fatalf("%s is %q (%v), want listpack", name, enc, err)
				}
				if b.IsCluster() {
					s, err := b.Client.ClusterKeySlot(ctx, name).Result()
					if err != nil {
						t.Fatal(err)
					}
					if slot >= 0 && s != slot {
						t.Fatalf("%s on slot %d, others on %d", name, s, slot)
					}
					slot = s
				}
			}
		}
	})
}
