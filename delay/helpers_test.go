package delay

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/testredis"
)

func testCtx(t *testing.T) context.Context { return testredis.Ctx(t) }

// namedQ is a queue called name under the backend's prefix, built from o.
func namedQ(t *testing.T, b *testredis.Backend, name string, o Options) *Queue {
	t.Helper()
	o.Prefix = b.Prefix
	q, err := New(b.Client, name, o)
	if err != nil {
		t.Fatalf("New(%s): %v", name, err)
	}
	return q
}

// newQ is the queue most tests use: "q1" under the backend's prefix.
func newQ(t *testing.T, b *testredis.Backend, o Options) *Queue {
	t.Helper()
	return namedQ(t, b, "q1", o)
}

// eachQueue runs fn as a subtest per backend (testredis.EachCtx) with a
// queue newQ built there from o.
func eachQueue(t *testing.T, o Options, fn func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue)) {
	t.Helper()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		fn(t, ctx, b, newQ(t, b, o))
	})
}

// jobsOf is n jobs, job i made by mk(i).
func jobsOf(n int, mk func(i int) Job) []Job {
	jobs := make([]Job, n)
	for i := range jobs {
		jobs[i] = mk(i)
	}
	return jobs
}

func mustEnqueue(t *testing.T, ctx context.Context, q *Queue, j Job) Enqueued {
	t.Helper()
	e, err := q.Enqueue(ctx, j)
	if err != nil {
		t.Fatalf("Enqueue(%q): %v", j.Key, err)
	}
	return e
}

func mustTake(t *testing.T, ctx context.Context, q *Queue, n int) takeBatch {
	t.Helper()
	b, err := q.takeN(ctx, n)
	if err != nil {
		t.Fatalf("Take(%d): %v", n, err)
	}
	return b
}

// mustEnqueueBatch enqueues jobs in one EnqueueBatch and fails on the
// call's error or on any job's.
func mustEnqueueBatch(t *testing.T, ctx context.Context, q *Queue, jobs []Job) []Enqueued {
	t.Helper()
	res, err := q.EnqueueBatch(ctx, jobs)
	if err != nil {
		t.Fatalf("EnqueueBatch: %v", err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("EnqueueBatch job %d: %v", i, r.Err)
		}
	}
	return res
}

// mustAckMany acks the leases of tasks in one AckMany and fails on any error.
func mustAckMany(t *testing.T, ctx context.Context, q *Queue, tasks []*Task) {
	t.Helper()
	errs, err := q.ackTasks(ctx, tasks)
	if err != nil || errors.Join(errs...) != nil {
		t.Fatalf("ack: %v %v", err, errs)
	}
}

// snapshot renders every key under the backend's prefix with its full
// content, to prove that a rejected call wrote nothing.
func snapshot(t *testing.T, ctx context.Context, b *testredis.Backend) string {
	t.Helper()
	keys, err := stateKeys(ctx, b)
	if err != nil {
		t.Fatalf("keys: %v", err)
	}
	sort.Strings(keys)
	out := ""
	for _, k := range keys {
		if strings.HasSuffix(k, "}:wake") {
			continue
		}
		typ, err := b.Client.Type(ctx, k).Result()
		if err != nil {
			t.Fatalf("type %s: %v", k, err)
		}
		var v any
		switch typ {
		case "zset":
			v, err = b.Client.ZRangeWithScores(ctx, k, 0, -1).Result()
		case "hash":
			m, e := b.Client.HGetAll(ctx, k).Result()
			ks := make([]string, 0, len(m))
			for f := range m {
				ks = append(ks, f+"="+m[f])
			}
			sort.Strings(ks)
			v, err = ks, e
		case "list":
			v, err = b.Client.LRange(ctx, k, 0, -1).Result()
		default:
			v, err = b.Client.Get(ctx, k).Result()
		}
		if err != nil {
			t.Fatalf("read %s: %v", k, err)
		}
		out += fmt.Sprintf("%s %s %v\n", k, typ, v)
	}
	return out
}

// passServerTime returns once Redis TIME is a whole millisecond past at
// (the queue keeps its times in ms): on miniredis it sets TIME there (a
// frozen clock from then on); on a real server it polls TIME, failing
// after 10 s.
func passServerTime(t *testing.T, ctx context.Context, b *testredis.Backend, at time.Time) {
	t.Helper()
	at = at.Truncate(time.Millisecond).Add(time.Millisecond)
	if b.Mini != nil {
		b.Mini.SetTime(at.Add(time.Millisecond))
		return
	}
	waitFor(t, 10*time.Second, "Redis TIME past "+at.Format(time.StampMicro), func() bool {
		now, err := b.Client.Time(ctx).Result()
		return err == nil && now.After(at)
	})
}

// setTime drives Redis TIME on miniredis; on real Redis it is a no-op and
// tests wait instead.
func setTime(b *testredis.Backend, t time.Time) {
	if b.Mini != nil {
		b.Mini.SetTime(t)
	}
}

// stateKeys lists the keys under the backend's prefix but the kept
// replies of mutating calls (reply.lua), the worker registry and the
// history: those are bookkeeping that the queue deletes after
// Options.ReplyTTL (with their index), that expires after 3 heartbeats of
// a killed worker, or historyTTL after the last write, not queue state.
func stateKeys(ctx context.Context, b *testredis.Backend) ([]string, error) {
	all, err := testredis.Keys(ctx, b.Client, b.Prefix)
	var keys []string
	for _, k := range all {
		if !strings.Contains(k, "}:rp:") && !strings.Contains(k, ":{workers}:") && !strings.HasSuffix(k, "}:hist") {
			keys = append(keys, k)
		}
	}
	return keys, err
}

// snapshot leaves out the wake list too: a hint with a 60 s TTL, which
// expires by itself during a long test (nothing in it is queue state).

// dropReplies deletes q's kept replies, so that a memory figure of tasks
// leaves out what the queue deletes by itself (TestMemoryPerKeptReply measures them).
func dropReplies(t *testing.T, ctx context.Context, c redis.UniversalClient, q *Queue) {
	t.Helper()
	keys, err := testredis.Keys(ctx, c, q.k.rp)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(keys); i += 1000 {
		if err := c.Unlink(ctx, keys[i:min(i+1000, len(keys))]...).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// workerOpts are the options of a pool of one line as the tests give
// them: the pool's, and the line's BatchSize and Prefetch. Concurrency
// (default 8) is per queue: a Sharded line's pool gets Concurrency
// handlers per shard.
type workerOpts struct {
	Concurrency, BatchSize, Prefetch, SweepBatch int
	AutoExtend                                   bool
	WakeClient                                   redis.UniversalClient
	ShutdownTimeout, WakeBlock, IdleCheck        time.Duration
	ReconnectMin, ReconnectMax, Heartbeat        time.Duration
}

// newWorker returns a pool serving l alone with h.
func newWorker(l Line, h Handler, o workerOpts) (*Pool, error) {
	conc := o.Concurrency
	if conc == 0 {
		conc = 8
	}
	if s, ok := l.(*Sharded); ok && s != nil {
		conc *= len(s.Shards())
	}
	p, err := NewPool(PoolOptions{Concurrency: conc, ShutdownTimeout: o.ShutdownTimeout, SweepBatch: o.SweepBatch,
		AutoExtend: o.AutoExtend, WakeClient: o.WakeClient, WakeBlock: o.WakeBlock, IdleCheck: o.IdleCheck,
		ReconnectMin: o.ReconnectMin, ReconnectMax: o.ReconnectMax, Heartbeat: o.Heartbeat})
	if err != nil {
		return nil, err
	}
	if err := p.Add(l, h, QueueOptions{BatchSize: o.BatchSize, Prefetch: o.Prefetch}); err != nil {
		return nil, err
	}
	return p, nil
}

// lookup lists the tasks of key through List: the readable ones, and an
// error wrapping the last unreadable one's. A pending task's state is
// StatePending (List reports StateDue or StateScheduled by the clock):
// these tests check which set a task is in.
func lookup(ctx context.Context, q *Queue, key string) ([]TaskInfo, error) {
	p, err := q.List(ctx, ListOptions{Key: key})
	if err != nil {
		return nil, err
	}
	var out []TaskInfo
	var bad error
	for _, t := range p.Tasks {
		if t.Err != nil {
			bad = t.Err
			continue
		}
		t.State = inSet(t.State)
		out = append(out, t)
	}
	return out, bad
}

// listDead reads count dead tasks from offset, oldest first, through
// List's cursor (Total counts the whole dead set).
func listDead(ctx context.Context, q *Queue, offset, count int) (Page, error) {
	o := ListOptions{State: StateDead, Limit: count}
	if offset == 0 {
		return q.List(ctx, o)
	}
	var skipped Page
	for left := offset; left > 0; {
		o.Limit = min(left, MaxBatch)
		p, err := q.List(ctx, o)
		if err != nil || p.Next == "" && len(p.Tasks) < o.Limit {
			return Page{Total: p.Total}, err
		}
		left -= len(p.Tasks)
		o.Cursor, skipped = p.Next, p
	}
	o.Limit = count
	p, err := q.List(ctx, o)
	if err == nil && skipped.Next == "" {
		p.Tasks = nil
	}
	return p, err
}

// inSet is StatePending for either half of the due set, else st.
func inSet(st State) State {
	if st == StateDue || st == StateScheduled {
		return StatePending
	}
	return st
}
