package delay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/testredis"
)

// faultEnv is a private redis-server behind a fault proxy, with a client
// on go-redis's default options (MaxRetries 3: a command whose reply was
// cut is sent again; ContextTimeoutEnabled set) through the proxy, and one
// straight to the server.
type faultEnv struct {
	srv    *testredis.Server
	proxy  *faultproxy.Proxy
	c      *redis.Client
	direct *redis.Client
}

func newFaultEnv(t *testing.T, serverArgs ...string) *faultEnv {
	t.Helper()
	f := testredis.StartFaulty(t, serverArgs...)
	return &faultEnv{srv: f.Server, proxy: f.Proxy, c: f.Cut, direct: f.Server.Client(nil)}
}

// loadScripts puts every script in the server's cache, so that a cut
// EVALSHA is one that ran, not a NOSCRIPT answer.
func loadScripts(t *testing.T, ctx context.Context, c redis.Scripter) {
	t.Helper()
	for _, s := range scripts {
		if err := s.script.Load(ctx, c).Err(); err != nil {
			t.Fatalf("script load %s: %v", s.name, err)
		}
	}
}

// lookupOne is the one task of key, by Lookup; it fails unless there is
// exactly one.
func lookupOne(t *testing.T, ctx context.Context, q *Queue, key string) TaskInfo {
	t.Helper()
	infos, err := lookup(ctx, q, key)
	if err != nil || len(infos) != 1 {
		t.Fatalf("Lookup(%q): %d tasks %+v, %v; want exactly 1", key, len(infos), infos, err)
	}
	return infos[0]
}

func mustStats(t *testing.T, ctx context.Context, q *Queue) Stats {
	t.Helper()
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// takeOne enqueues a task due now and takes it.
func takeOne(t *testing.T, ctx context.Context, q *Queue, j Job) *Task {
	t.Helper()
	mustEnqueue(t, ctx, q, j)
	b := mustTake(t, ctx, q, 1)
	if len(b.Tasks) != 1 {
		t.Fatalf("take: %d tasks, want 1", len(b.Tasks))
	}
	return b.Tasks[0]
}

// deadOne puts a task of key in the dead set and returns its ID.
func deadOne(t *testing.T, ctx context.Context, q *Queue, key string) string {
	t.Helper()
	tk := takeOne(t, ctx, q, Job{Key: key})
	if out, err := q.killTask(ctx, tk, errors.New("boom")); err != nil || out != outcomeDead {
		t.Fatalf("kill: %v %v", out, err)
	}
	return tk.ID
}

// TestFaultCutReplyEveryScript cuts exactly one reply of every mutating
// script after Redis ran it; go-redis sends the command again. The call
// must report what its first run did: one task per Enqueue, Duplicate
// false for its own write, success where the change was made, and a take
// whose reply was lost hands over the tasks it moved, under the same lease.
func TestFaultCutReplyEveryScript(t *testing.T) {
	t.Parallel()
	env := newFaultEnv(t)
	ctx := testCtx(t)
	loadScripts(t, ctx, env.direct)
	type faultCase struct {
		name string
		opts Options
		// run sets up through q, calls arm() right before the call under
		// test and checks its outcome.
		run func(t *testing.T, ctx context.Context, q *Queue, arm func())
	}
	cases := []faultCase{
		{name: "enqueue", run: func(t *testing.T, ctx context.Context, q *Queue, arm func()) {
			arm()
			e, err := q.Enqueue(ctx, Job{Key: "k", Payload: []byte("p")})
			if err != nil || e.Duplicate || e.State != StatePending {
				t.Fatalf("Enqueue: %+v %v, want a new pending task", e, err)
			}
			ti := lookupOne(t, ctx, q, "k")
			if ti.ID != e.ID || !ti.When.Equal(e.Due) {
				t.Fatalf("Lookup %+v, Enqueue said %+v", ti, e)
			}
			if st := mustStats(t, ctx, q); st.Pending != 1 {
				t.Fatalf("pending %d, want 1", st.Pending)
			}
		}},
		{name: "enqueue with token", run: func(t *testing.T, ctx context.Context, q *Queue, arm func()) {
			arm()
			e, err := q.Enqueue(ctx, Job{Key: "k", Token: "tok"})
			if err != nil || e.Duplicate || e.Token != "tok" {
				t.Fatalf("Enqueue: %+v %v, want a new task (Duplicate false)", e, err)
			}
			if ti := lookupOne(t, ctx, q, "k"); ti.ID != e.ID || ti.Token != "tok" {
				t.Fatalf("Lookup %+v, Enqueue said %+v", ti, e)
			}
		}},
		{name: "enqueue batch", run: func(t *testing.T, ctx context.Context, q *Queue, arm func()) {
			jobs := []Job{{Key: "a"}, {Key: "b", Token: "t"}, {Key: "b", Token: "t"}, {Key: "c", When: After(time.Hour)}}
			arm()
			res, err := q.EnqueueBatch(ctx, jobs)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				if r.Err != nil || r.Duplicate != (i == 2) {
					t.Fatalf("job %d: %+v, want Duplicate=%v", i, r, i == 2)
				}
			}
			for _, k := range []string{"a", "b", "c"} {
				lookupOne(t, ctx, q, k)
			}
			if st := mustStats(t, ctx, q); st.Pending != 3 {
				t.Fatalf("pending %d, want 3", st.Pending)
			}
		}},
		{name: "take", run: func(t *testing.T, ctx context.Context, q *Queue, arm func()) {
			for i := range 3 {
				mustEnqueue(t, ctx, q, Job{Key: fmt.Sprint("k", i), Payload: []byte("payload")})
			}
			arm()
			b := mustTake(t, ctx, q, 10)
			if len(b.Tasks) != 3 {
				t.Fatalf("take: %d tasks, want the 3 due", len(b.Tasks))
			}
			if st := mustStats(t, ctx, q); st.InFlight != 3 || st.Pending != 0 || st.Delivered != 3 {
				t.Fatalf("stats %+v: want 3 in flight, 3 delivered", st)
			}
			for _, tk := range b.Tasks {
				if string(tk.Payload) != "payload" || tk.Attempt != 1 {
					t.Fatalf("task %+v", tk)
				}
			}
			mustAckMany(t, ctx, q, b.Tasks) // the leases handed over are the live ones
			arm()
			if b := mustTake(t, ctx, q, 10); len(b.Tasks) != 0 {
				t.Fatalf("take of an empty queue: %d tasks", len(b.Tasks))
			}
		}},
		{name: "ack", run: func(t *testing.T, ctx context.Context, q *Queue, arm func()) {
			tk := takeOne(t, ctx, q, Job{Key: "k"})
			arm()
			if err := q.ackTask(ctx, tk); err != nil {
				t.Fatalf("Ack: %v, want success", err)
			}
			if infos, _ := lookup(ctx, q, "k"); len(infos) != 0 {
				t.Fatalf("after ack: %+v", infos)
			}
			if st := mustStats(t, ctx, q); st.Acked != 1 || st.InFlight != 0 {
				t.Fatalf("stats %+v: want 1 acked", st)
			}
		}},
		{name: "ack keeping tombstones", opts: Options{DoneTTL: time.Hour}, run: func(t *testing.T, ctx context.Context, q *Queue, arm func()) {
			tk := takeOne(t, ctx, q, Job{Key: "k", Token: "t"})
			arm()
			if err := q.ackTask(ctx, tk); err != nil {
				t.Fatalf("Ack: %v, want success", err)
			}
			if ti := lookupOne(t, ctx, q, "k"); ti.State != StateDone {
				t.Fatalf("state %s, want done", ti.State)
			}
			if st := mustStats(t, ctx, q); st.Acked != 1 || st.Done != 1 {
				t.Fatalf("stats %+v: want 1 acked, 1 tombstone", st)
			}
		}},
		{name: "retry", run: func(t *testing.T, ctx context.Context, q *Queue, arm func()) {
			tk := takeOne(t, ctx, q, Job{Key: "k"})
			arm()
			if out, err := q.retryAfter(ctx, tk, time.Hour, errors.New("again")); err != nil || out != outcomeRetried {
				t.Fatalf("RetryAfter: %v %v, want retried", out, err)
			}
			if ti := lookupOne(t, ctx, q, "k"); ti.State != StatePending || ti.Attempt != 1 || ti.LastError != "again" {
				t.Fatalf("after retry: %+v", ti)
			}
			if st := mustStats(t, ctx, q); st.Retries != 1 {
				t.Fatalf("retries %d, want 1", st.Retries)
			}
		}},
		{name: "kill", run: func(t *testing.T, ctx context.Context, q *Queue, arm func()) {
			tk := takeOne(t, ctx, q, Job{Key: "k"})
			arm()
			if out, err := q.killTask(ctx, tk, errors.New("bad")); err != nil || out != outcomeDead {
				t.Fatalf("Kill: %v %v, want dead", out, err)
			}
			if ti := lookupOne(t, ctx, q, "k"); ti.State != StateDead {
				t.Fatalf("after kill: %+v", ti)
			}
			if st := mustStats(t, ctx, q); st.Dead != 1 || st.DeadLettered != 1 {
				t.Fatalf("stats %+v: want 1 dead", st)
			}
		}},
		{name: "extend", run: func(t *testing.T, ctx context.Context, q *Queue, arm func()) {
			tk := takeOne(t, ctx, q, Job{Key: "k"})
			arm()
			d, err := q.extend(ctx, tk, time.Hour)
			if err != nil || !d.After(tk.Deadline) {
				t.Fatalf("Extend: %v %v, want a deadline after %v", d, err, tk.Deadline)
			}
			if ti := lookupOne(t, ctx, q, "k"); !ti.When.Equal(d) {
				t.Fatalf("lease deadline %v, Extend said %v", ti.When, d)
			}
		}},
		{name: "release", run: func(t *testing.T, ctx context.Context, q *Queue, arm func()) {
			tk := takeOne(t, ctx, q, Job{Key: "k"})
			arm()
			errs, err := q.release(ctx, []*Task{tk})
			if err != nil || errs[0] != nil {
				t.Fatalf("release: %v %v", err, errs)
			}
			if ti := lookupOne(t, ctx, q, "k"); ti.State != StatePending || ti.Attempt != 0 {
				t.Fatalf("after release: %+v", ti)
			}
		}},
		{name: "cancel", run: func(t *testing.T, ctx context.Context, q *Queue, arm func()) {
			mustEnqueue(t, ctx, q, Job{Key: "k", When: After(time.Hour)})
			arm()
			r, err := q.Cancel(ctx, Selector{Key: "k"})
			if err != nil || r.Pending != 1 {
				t.Fatalf("Cancel: %+v %v, want 1 pending cancelled", r, err)
			}
			if st := mustStats(t, ctx, q); st.Pending != 0 || st.Cancelled != 1 {
				t.Fatalf("stats %+v", st)
			}
		}},
		{name: "reschedule", run: func(t *testing.T, ctx context.Context, q *Queue, arm func()) {
			mustEnqueue(t, ctx, q, Job{Key: "k", When: After(time.Hour)})
			at := time.Now().Add(2 * time.Hour).Truncate(time.Millisecond)
			arm()
			r, err := q.Reschedule(ctx, Selector{Key: "k"}, At(at))
			if err != nil || r.Moved != 1 || !r.Due.Equal(at) {
				t.Fatalf("Reschedule: %+v %v, want 1 moved to %v", r, err, at)
			}
			if ti := lookupOne(t, ctx, q, "k"); !ti.When.Equal(at) {
				t.Fatalf("due %v, want %v", ti.When, at)
			}
		}},
		{name: "requeue", run: func(t *testing.T, ctx context.Context, q *Queue, arm func()) {
			id := deadOne(t, ctx, q, "k")
			arm()
			if n, err := q.Requeue(ctx, Selector{IDs: []string{id}}); err != nil || n != 1 {
				t.Fatalf("Requeue: %d %v, want 1", n, err)
			}
			if ti := lookupOne(t, ctx, q, "k"); ti.State != StatePending {
				t.Fatalf("after requeue: %+v", ti)
			}
		}},
		{name: "purge", run: func(t *testing.T, ctx context.Context, q *Queue, arm func()) {
			id := deadOne(t, ctx, q, "k")
			arm()
			if n, err := q.Purge(ctx, Selector{IDs: []string{id}}); err != nil || n != 1 {
				t.Fatalf("Purge: %d %v, want 1", n, err)
			}
			if st := mustStats(t, ctx, q); st.Dead != 0 {
				t.Fatalf("dead %d after purge", st.Dead)
			}
		}},
		{name: "sweep", opts: Options{Lease: 20 * time.Millisecond}, run: func(t *testing.T, ctx context.Context, q *Queue, arm func()) {
			tk := takeOne(t, ctx, q, Job{Key: "k"})
			waitServerPast(t, ctx, q, tk.Deadline)
			arm()
			r, err := q.Sweep(ctx, 10)
			if err != nil || r.Returned != 1 {
				t.Fatalf("Sweep: %+v %v, want 1 returned", r, err)
			}
			if st := mustStats(t, ctx, q); st.Expired != 1 || st.Pending != 1 {
				t.Fatalf("stats %+v: want 1 expired, back in pending", st)
			}
		}},
		{name: "remove (reconcile)", run: func(t *testing.T, ctx context.Context, q *Queue, arm func()) {
			mustEnqueue(t, ctx, q, Job{Key: "k", Token: "t", When: After(time.Hour)})
			arm()
			r, err := q.Reconcile(ctx, &sliceSource{}, time.Now().Add(2*time.Hour), ReconcileOptions{})
			if err != nil || r.Removed != 1 {
				t.Fatalf("Reconcile: %+v %v, want 1 removed", r, err)
			}
			if st := mustStats(t, ctx, q); st.Pending != 0 {
				t.Fatalf("pending %d", st.Pending)
			}
		}},
		{name: "repair", run: func(t *testing.T, ctx context.Context, q *Queue, arm func()) {
			mustEnqueue(t, ctx, q, Job{Key: "k", When: After(time.Hour)})
			if err := q.c.HDel(ctx, q.k.ctr, "id").Err(); err != nil {
				t.Fatal(err)
			}
			arm()
			r, err := q.Repair(ctx)
			if err != nil || !r.CounterRaised || r.TopID != 1 {
				t.Fatalf("Repair: %+v %v, want the counter raised to 1", r, err)
			}
		}},
		{name: "pause", run: func(t *testing.T, ctx context.Context, q *Queue, arm func()) {
			mustEnqueue(t, ctx, q, Job{Key: "k"})
			arm()
			// a re-run would find the queue paused and say unchanged
			if changed, err := q.setPaused(ctx, "1"); err != nil || !changed {
				t.Fatalf("Pause: changed %v, %v; want the change of its first run", changed, err)
			}
			if st := mustStats(t, ctx, q); !st.Paused {
				t.Fatal("not paused")
			}
			if b := mustTake(t, ctx, q, 10); !b.Paused || len(b.Tasks) != 0 {
				t.Fatalf("take: paused %v, %d tasks", b.Paused, len(b.Tasks))
			}
		}},
		{name: "resume", run: func(t *testing.T, ctx context.Context, q *Queue, arm func()) {
			mustEnqueue(t, ctx, q, Job{Key: "k"})
			if err := q.Pause(ctx); err != nil {
				t.Fatal(err)
			}
			arm()
			if changed, err := q.setPaused(ctx, "0"); err != nil || !changed {
				t.Fatalf("Resume: changed %v, %v; want the change of its first run", changed, err)
			}
			if b := mustTake(t, ctx, q, 10); b.Paused || len(b.Tasks) != 1 {
				t.Fatalf("take: paused %v, %d tasks; want the one task", b.Paused, len(b.Tasks))
			}
		}},
		{name: "rate", run: func(t *testing.T, ctx context.Context, q *Queue, arm func()) {
			for i := range 5 {
				mustEnqueue(t, ctx, q, Job{Key: fmt.Sprint("k", i)})
			}
			arm()
			if err := q.SetRate(ctx, Rate{PerSecond: 0.001, Burst: 3}); err != nil {
				t.Fatal(err)
			}
			// the call reports success, and the limit it set holds
			if b := mustTake(t, ctx, q, 10); len(b.Tasks) != 3 || b.NextToken.IsZero() {
				t.Fatalf("take under the limit: %d tasks, next token %v; want the burst of 3", len(b.Tasks), b.NextToken)
			}
		}},
		{name: "sharded enqueue and batch", run: func(t *testing.T, ctx context.Context, q *Queue, arm func()) {
			s, err := NewSharded(q.c, "sh", ShardedOptions{Shards: 4, Queue: Options{Prefix: q.o.Prefix}})
			if err != nil {
				t.Fatal(err)
			}
			arm()
			if e, err := s.Enqueue(ctx, Job{Key: "one"}); err != nil || e.Duplicate {
				t.Fatalf("Sharded.Enqueue: %+v %v", e, err)
			}
			jobs := jobsOf(16, func(i int) Job { return Job{Key: fmt.Sprint("key", i)} })
			arm()
			res, err := s.EnqueueBatch(ctx, jobs)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				if r.Err != nil || r.Duplicate {
					t.Fatalf("job %d: %+v", i, r)
				}
			}
			for _, k := range append([]string{"one"}, "key0", "key7", "key15") {
				lookupOne(t, ctx, s.For(k), k)
			}
			var pending int64
			st, err := s.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range st {
				pending += x.Pending
			}
			if pending != 17 {
				t.Fatalf("pending %d across shards, want 17", pending)
			}
		}},
		{name: "grouped enqueue from 32 goroutines", run: func(t *testing.T, ctx context.Context, q *Queue, arm func()) {
			const n = 32
			var wg sync.WaitGroup
			errs := make([]error, n)
			res := make([]Enqueued, n)
			arm()
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res[i], errs[i] = q.Enqueue(ctx, Job{Key: fmt.Sprint("g", i)})
				}()
			}
			wg.Wait()
			for i := range n {
				if errs[i] != nil || res[i].Duplicate {
					t.Fatalf("call %d: %+v %v", i, res[i], errs[i])
				}
				lookupOne(t, ctx, q, fmt.Sprint("g", i))
			}
			if st := mustStats(t, ctx, q); st.Pending != n {
				t.Fatalf("pending %d, want %d", st.Pending, n)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			o.Prefix = testredis.Prefix(t)
			q, err := New(env.c, "q", o)
			if err != nil {
				t.Fatal(err)
			}
			before := env.proxy.Cuts()
			arms := 0
			arm := func() {
				arms++
				env.proxy.CutNext(1, faultproxy.Contains("evalsha"))
			}
			tc.run(t, ctx, q, arm)
			if got := env.proxy.Cuts() - before; got != int64(arms) || env.proxy.Armed() != 0 {
				t.Fatalf("%d replies cut (armed %d left), want %d: the call under test was not cut", got, env.proxy.Armed(), arms)
			}
		})
	}
}

// waitServerPast polls Redis TIME (through Stats) until it is past at.
func waitServerPast(t *testing.T, ctx context.Context, q *Queue, at time.Time) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for mustStats(t, ctx, q).ServerTime.Before(at.Add(time.Millisecond)) {
		if time.Now().After(deadline) {
			t.Fatalf("Redis TIME not past %v within 10 s", at)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFaultRetriesExhausted: every send of a take and of an ack is cut,
// so go-redis gives up (1 send + MaxRetries 3) and the call fails. The
// Worker then sends the same call again under the same request ID (take
// and ackMany with req): the take hands over the tasks the lost run moved,
// under that run's lease, and the ack reports the success of its lost run.
func TestFaultRetriesExhausted(t *testing.T) {
	t.Parallel()
	env := newFaultEnv(t)
	ctx := testCtx(t)
	loadScripts(t, ctx, env.direct)
	q, err := New(env.c, "q", Options{Prefix: testredis.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		mustEnqueue(t, ctx, q, Job{Key: fmt.Sprint("k", i)})
	}
	req := q.req.next()
	env.proxy.CutNext(4, faultproxy.Contains("evalsha"))
	if _, err := q.take(ctx, 10, req); !errors.Is(err, ErrRedis) {
		t.Fatalf("take with every reply cut: %v, want ErrRedis", err)
	}
	if st := mustStats(t, ctx, q); st.InFlight != 4 {
		t.Fatalf("in flight %d after the lost take, want 4 (it ran)", st.InFlight)
	}
	b, err := q.take(ctx, 10, req)
	if err != nil || len(b.Tasks) != 4 {
		t.Fatalf("take sent again: %d tasks, %v; want the 4 the lost run took", len(b.Tasks), err)
	}
	if st := mustStats(t, ctx, q); st.InFlight != 4 || st.Delivered != 4 {
		t.Fatalf("stats %+v: want 4 in flight, 4 delivered", st)
	}
	leases := make([]leaseRef, len(b.Tasks))
	for i, tk := range b.Tasks {
		leases[i] = tk.lease
	}
	ackReq := q.req.next()
	env.proxy.CutNext(4, faultproxy.Contains("evalsha"))
	if _, err := q.ackMany(ctx, leases, ackReq); !errors.Is(err, ErrRedis) {
		t.Fatalf("ack with every reply cut: %v, want ErrRedis", err)
	}
	errs, err := q.ackMany(ctx, leases, ackReq)
	if err != nil || errors.Join(errs...) != nil {
		t.Fatalf("ack sent again: %v %v, want success for all", err, errs)
	}
	if st := mustStats(t, ctx, q); st.Acked != 4 || st.InFlight != 0 {
		t.Fatalf("stats %+v: want 4 acked", st)
	}
	t.Logf("%d replies cut", env.proxy.Cuts())
}
