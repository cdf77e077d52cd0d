package delay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/testredis"
)

// lookupTokens is the sorted "token=state" list Lookup gives for key.
func lookupTokens(t *testing.T, ctx context.Context, q *Queue, key string) string {
	t.Helper()
	infos, err := lookup(ctx, q, key)
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
	t.Parallel()
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
	keyA, keyB := collidingKeys(t)
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
		for ci, tc := range cases {
			// shared: another key with the same digest holds a task in the
			// same index entry all along, as colliding keys do
			for _, shared := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/shared=%v", tc.name, shared), func(t *testing.T) {
					ctx := testCtx(t)
					q, err := New(b.Client, fmt.Sprintf("idx%d-%v", ci, shared), Options{Prefix: b.Prefix})
					if err != nil {
						t.Fatal(err)
					}
					key := keyA
					var other Enqueued
					if shared {
						other = mustEnqueue(t, ctx, q, Job{Key: keyB, Token: "z", When: After(time.Hour)})
					}
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
							if err := q.ackTask(ctx, held[s.token]); err != nil {
								t.Fatalf("step %d: ack: %v", si, err)
							}
						case "cancel":
							if _, err := q.Cancel(ctx, Selector{Key: key, Token: s.token}); err != nil {
								t.Fatalf("step %d: cancel: %v", si, err)
							}
						}
						if got := lookupTokens(t, ctx, q, key); got != s.want {
							t.Fatalf("step %d (%s %s): Lookup %q, want %q", si, s.op, s.token, got, s.want)
						}
						if shared {
							if got := lookupTokens(t, ctx, q, keyB); got != "z=pending" {
								t.Fatalf("step %d (%s %s): Lookup of the other key %q, want z=pending", si, s.op, s.token, got)
							}
						}
					}
					if tc.steps[len(tc.steps)-1].want != "" {
						return
					}
					// nothing of the key is left: its entry holds only the
					// other key's task (or is gone), its records are gone
					entry, err := b.Client.HGet(ctx, q.k.idx, digest(key)).Result()
					if shared && (err != nil || entry != other.ID) {
						t.Fatalf("shared entry %q (%v), want %q", entry, err, other.ID)
					}
					if !shared && err != redis.Nil {
						t.Fatalf("entry %q (%v) left", entry, err)
					}
					want := 0
					if shared {
						want = 1
					}
					if n, err := testredis.CountKeys(ctx, b.Client, q.k.tasks+":"); err != nil || n != want {
						t.Fatalf("%d tasks buckets left, want %d (%v)", n, want, err)
					}
				})
			}
		}
	})
}

// collidingKeys finds two business keys with one digest (a birthday search
// over 36 bits: about 2^18 keys), once per test binary. The pair the
// search finds for today's digest is checked first: the search costs
// seconds of CPU in a serial test, and runs only if digest changes.
var collidingKeys = func() func(t *testing.T) (string, string) {
	var once sync.Once
	var a, b string
	return func(t *testing.T) (string, string) {
		t.Helper()
		once.Do(func() {
			if ka, kb := "order:524648", "order:841828"; digest(ka) == digest(kb) {
				a, b = ka, kb
				return
			}
			seen := make(map[string]string, 1<<19)
			for i := 0; i < 1<<23; i++ {
				k := fmt.Sprintf("order:%d", i)
				d := digest(k)
				if prev, ok := seen[d]; ok {
					a, b = prev, k
					return
				}
				seen[d] = k
			}
		})
		if a == "" {
			t.Fatal("no digest collision found")
		}
		return a, b
	}
}()

// Keys that share a digest share one index entry; every path that reads
// it must tell them apart by the key in each record.
func TestDigestCollisions(t *testing.T) {
	t.Parallel()
	keyA, keyB := collidingKeys(t)
	if keyA == keyB || digest(keyA) != digest(keyB) {
		t.Fatalf("keys %q %q do not collide", keyA, keyB)
	}
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		a1 := mustEnqueue(t, ctx, q, Job{Key: keyA, Token: "t", When: After(time.Hour)})
		b1 := mustEnqueue(t, ctx, q, Job{Key: keyB, Token: "t", When: After(time.Hour)})
		if b1.Duplicate || b1.ID == a1.ID {
			t.Fatalf("same token under another key with the same digest: %+v, first %+v", b1, a1)
		}
		if d := mustEnqueue(t, ctx, q, Job{Key: keyA, Token: "t"}); !d.Duplicate || d.ID != a1.ID {
			t.Fatalf("duplicate of A: %+v, want %s", d, a1.ID)
		}
		res, err := q.EnqueueBatch(ctx, []Job{{Key: keyB, Token: "t"}, {Key: keyA, Token: "u"}, {Key: keyB, Token: "v"}, {Key: keyA, Token: "u"}})
		if err != nil {
			t.Fatal(err)
		}
		if !res[0].Duplicate || res[0].ID != b1.ID || res[1].Duplicate || res[2].Duplicate || !res[3].Duplicate || res[3].ID != res[1].ID {
			t.Fatalf("batch across colliding keys: %+v", res)
		}
		if got := lookupTokens(t, ctx, q, keyA); got != "t=pending,u=pending" {
			t.Fatalf("A: %s", got)
		}
		if got := lookupTokens(t, ctx, q, keyB); got != "t=pending,v=pending" {
			t.Fatalf("B: %s", got)
		}
		// the per-key cap counts the key's own tasks, not the entry's
		for i := 2; i < maxTasksPerKey; i++ {
			mustEnqueue(t, ctx, q, Job{Key: keyA, Token: fmt.Sprintf("n%d", i), When: After(time.Hour)})
		}
		if _, err := q.Enqueue(ctx, Job{Key: keyA, Token: "over"}); !errors.Is(err, ErrTooManyTasks) {
			t.Fatalf("A over the cap: %v", err)
		}
		mustEnqueue(t, ctx, q, Job{Key: keyB, Token: "w", When: After(time.Hour)})
		rs, err := q.Reschedule(ctx, Selector{Key: keyB}, After(2*time.Hour))
		if err != nil || rs.Moved != 3 {
			t.Fatalf("reschedule B: %+v %v", rs, err)
		}
		cr, err := q.Cancel(ctx, Selector{Key: keyA})
		if err != nil || cr.Pending != maxTasksPerKey {
			t.Fatalf("cancel A: %+v %v", cr, err)
		}
		if got := lookupTokens(t, ctx, q, keyB); got != "t=pending,v=pending,w=pending" {
			t.Fatalf("B after cancelling A: %s", got)
		}
		if got := lookupTokens(t, ctx, q, keyA); got != "" {
			t.Fatalf("A after cancel: %s", got)
		}
		cr, err = q.Cancel(ctx, Selector{Key: keyB})
		if err != nil || cr.Pending != 3 {
			t.Fatalf("cancel B: %+v %v", cr, err)
		}
		if n := indexEntries(t, b, q); n != 0 {
			t.Fatalf("index holds %d entries", n)
		}
	})
}

// On real Redis the tasks buckets are listpack-encoded (what the memory
// figure rests on), each record is where taskBucket says, the index entry
// of each key holds its task, and in a cluster every bucket is on the
// index's slot.
func TestBucketLayout(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		q := newQ(t, b, Options{})
		jobs := jobsOf(300, func(i int) Job {
			return Job{Key: fmt.Sprintf("order:2026-12-01:%08d", i), Payload: []byte("0123456789abcdef")}
		})
		res := mustEnqueueBatch(t, ctx, q, jobs)
		for _, r := range res {
			if ok, err := b.Client.HExists(ctx, q.k.taskBucket(r.ID), r.ID).Result(); err != nil || !ok {
				t.Fatalf("record of %s not in %s (%v)", r.ID, q.k.taskBucket(r.ID), err)
			}
		}
		for i, j := range jobs {
			if v, err := b.Client.HGet(ctx, q.k.idx, digest(j.Key)).Result(); err != nil || !strings.Contains(","+v+",", ","+res[i].ID+",") {
				t.Fatalf("index entry of %s is %q (%v), want it to hold %s", j.Key, v, err, res[i].ID)
			}
		}
		slot := int64(-1)
		if b.IsCluster() {
			s, err := b.Client.ClusterKeySlot(ctx, q.k.idx).Result()
			if err != nil {
				t.Fatal(err)
			}
			slot = s
		}
		{
			names, err := testredis.Keys(ctx, b.Client, q.k.tasks+":")
			if err != nil || len(names) == 0 {
				t.Fatalf("no buckets under %s (%v)", q.k.tasks, err)
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
