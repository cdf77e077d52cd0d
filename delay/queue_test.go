package delay

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/score"
)

func TestEnqueueTakeAck(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{Lease: time.Second}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		e := mustEnqueue(t, ctx, q, Job{Key: "order:1", Payload: []byte("hello")})
		if e.Duplicate || e.ID == "" || e.Token != e.ID || e.State != StatePending {
			t.Fatalf("enqueued = %+v", e)
		}
		bt := mustTake(t, ctx, q, 10)
		if len(bt.Tasks) != 1 {
			t.Fatalf("took %d tasks, want 1", len(bt.Tasks))
		}
		tk := bt.Tasks[0]
		if tk.ID != e.ID || tk.Key != "order:1" || string(tk.Payload) != "hello" || tk.Attempt != 1 || tk.lease.Fence <= 0 {
			t.Fatalf("task = %+v", tk)
		}
		if tk.Due != e.Due || tk.Lateness() < 0 {
			t.Fatalf("due %v vs %v, lateness %v", tk.Due, e.Due, tk.Lateness())
		}
		if again := mustTake(t, ctx, q, 10); len(again.Tasks) != 0 {
			t.Fatalf("second take got %d tasks", len(again.Tasks))
		}
		if err := q.ackTask(ctx, tk); err != nil {
			t.Fatalf("ack: %v", err)
		}
		if err := q.ackTask(ctx, tk); !errors.Is(err, ErrNotFound) {
			t.Fatalf("second ack: %v, want ErrNotFound", err)
		}
		assertOnlyCounters(t, b, q)
	})
}

// assertOnlyCounters checks that no task structure is left: only the ctr,
// stats and (expiring) wake keys may remain.
func assertOnlyCounters(t *testing.T, b *testredis.Backend, q *Queue) {
	t.Helper()
	ctx := testCtx(t)
	keys, err := stateKeys(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{q.k.ctr: true, q.k.stats: true, q.k.wake: true}
	for _, k := range keys {
		if k == q.k.idx && indexEntries(t, b, q) == 0 {
			continue
		}
		if !allowed[k] {
			n, _ := b.Client.Exists(ctx, k).Result()
			t.Errorf("leftover key %s (exists=%d)", k, n)
		}
	}
}

// indexEntries counts the index's entries: its fields but the mark it
// keeps from the first enqueue on (IDX_MARK in lib.lua).
func indexEntries(t *testing.T, b *testredis.Backend, q *Queue) int64 {
	t.Helper()
	ctx := testCtx(t)
	n, err := b.Client.HLen(ctx, q.k.idx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if b.Client.HExists(ctx, q.k.idx, "~").Val() {
		n--
	}
	return n
}

func TestOrderingSameMillisecond(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		at := time.Now().Add(-time.Second).Truncate(time.Millisecond)
		const n = 1100 // more than 1024 in one ms: spills, counted
		jobs := jobsOf(n, func(i int) Job { return Job{Key: fmt.Sprintf("k%d", i), When: At(at)} })
		res := mustEnqueueBatch(t, ctx, q, jobs)
		for i, r := range res {
			wantMs, wantSeq := at, int64(i)
			if i >= 1024 {
				wantMs, wantSeq = at.Add(time.Millisecond), int64(i-1024)
			}
			if !r.Due.Equal(wantMs) || r.Seq != wantSeq {
				t.Fatalf("job %d: due %v seq %d, want %v seq %d", i, r.Due, r.Seq, wantMs, wantSeq)
			}
		}
		var got []string
		for len(got) < n {
			bt := mustTake(t, ctx, q, 1000)
			if len(bt.Tasks) == 0 {
				t.Fatalf("took only %d", len(got))
			}
			for _, tk := range bt.Tasks {
				got = append(got, tk.Key)
			}
		}
		for i, k := range got {
			if k != fmt.Sprintf("k%d", i) {
				t.Fatalf("position %d: %s", i, k)
			}
		}
		st, err := q.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.SeqOverflows != n-1024 {
			t.Fatalf("overflows = %d, want %d", st.SeqOverflows, n-1024)
		}
		// every score written is a valid codec score ≤ 2^53
		zs, _ := b.Client.ZRangeWithScores(ctx, q.k.inflight, 0, -1).Result()
		for _, z := range zs {
			if _, err := score.ParseFloat(z.Score); err != nil {
				t.Fatalf("inflight score %v: %v", z.Score, err)
			}
		}
	})
}

// TestBurstBeyond64FullMs: a burst due at one instant larger than 64 full
// milliseconds (65,536 tasks at 10 bits). Each task starts its search
// where the last one for that instant landed, so none walks the full ms
// again and none fails with ErrSeqExhausted. Batched
// and then one by one: the order holds across both, and so does the
// count of spilled tasks.
func TestBurstBeyond64FullMs(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		q := newQ(t, b, Options{})
		at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		const n = 64*1024 + 1500
		jobs := jobsOf(n, func(i int) Job { return Job{Key: fmt.Sprintf("k%d", i), When: At(at)} })
		res, err := q.EnqueueBatch(ctx, jobs)
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 3; k++ {
			e, err := q.Enqueue(ctx, Job{Key: fmt.Sprintf("one%d", k), When: At(at)})
			res = append(res, e)
			if err != nil {
				t.Fatalf("one by one %d: %v", k, err)
			}
		}
		for i, r := range res {
			if r.Err != nil {
				t.Fatalf("job %d: %v", i, r.Err)
			}
			wantMs := at.Add(time.Duration(i/1024) * time.Millisecond)
			if !r.Due.Equal(wantMs) || r.Seq != int64(i%1024) {
				t.Fatalf("job %d: due %v seq %d, want %v seq %d", i, r.Due, r.Seq, wantMs, i%1024)
			}
		}
		st, err := q.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(len(res) - 1024); st.SeqOverflows != want || st.Pending != int64(len(res)) {
			t.Fatalf("overflows %d, pending %d; want %d, %d", st.SeqOverflows, st.Pending, want, len(res))
		}
	})
}

func TestInterleavedDueTimesKeepOrder(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, _ *testredis.Backend, q *Queue) {
		t1 := time.Now().Add(-2 * time.Second).Truncate(time.Millisecond)
		t2 := t1.Add(5 * time.Millisecond)
		order := []time.Time{t1, t2, t1, t2, t1}
		for i, at := range order {
			mustEnqueue(t, ctx, q, Job{Key: fmt.Sprintf("k%d", i), When: At(at)})
		}
		bt := mustTake(t, ctx, q, 10)
		var keys []string
		for _, tk := range bt.Tasks {
			keys = append(keys, tk.Key)
		}
		if fmt.Sprint(keys) != "[k0 k2 k4 k1 k3]" {
			t.Fatalf("order %v", keys)
		}
	})
}

// Every key of a queue hashes to one slot, so no script is CROSSSLOT.
func TestKeysShareOneSlot(t *testing.T) {
	t.Parallel()
	testredis.EachReal(t, func(t *testing.T, b *testredis.Backend) {
		if !b.IsCluster() {
			t.Skip("CLUSTER KEYSLOT needs a cluster")
		}
		ctx := testCtx(t)
		for _, name := range []string{"q1", "orders:0", "orders:7", "ü-名"} {
			q, err := New(b.Client, name, Options{Prefix: b.Prefix})
			if err != nil {
				t.Fatal(err)
			}
			slots := map[int64]bool{}
			for _, k := range q.Keys() {
				s, err := b.Client.ClusterKeySlot(ctx, k).Result()
				if err != nil {
					t.Fatal(err)
				}
				slots[s] = true
			}
			if len(slots) != 1 {
				t.Fatalf("queue %q keys span slots %v", name, slots)
			}
		}
	})
}

func TestExpBackoff(t *testing.T) {
	t.Parallel()
	bo := ExpBackoff(100*time.Millisecond, 5*time.Second)
	for attempt := 1; attempt <= 40; attempt++ {
		full := min(100*time.Millisecond<<min(attempt-1, 30), 5*time.Second)
		for range 50 {
			d := bo(attempt)
			if d < full/2 || d > full {
				t.Fatalf("attempt %d: %v outside [%v, %v]", attempt, d, full/2, full)
			}
		}
	}
	seen := map[time.Duration]bool{}
	for range 100 {
		seen[bo(5)] = true
	}
	if len(seen) < 10 {
		t.Fatalf("no jitter: %d distinct delays", len(seen))
	}
}
