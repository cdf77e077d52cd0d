package delay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

// Enqueue is idempotent by (business key, token).
func TestIdempotentEnqueue(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		first := mustEnqueue(t, ctx, q, Job{Key: "order:7", Token: "cancel", When: After(time.Hour)})
		again := mustEnqueue(t, ctx, q, Job{Key: "order:7", Token: "cancel", When: After(2 * time.Hour)})
		if !again.Duplicate || again.ID != first.ID || !again.Due.Equal(first.Due) || again.State != StatePending {
			t.Fatalf("duplicate = %+v, first = %+v", again, first)
		}
		other := mustEnqueue(t, ctx, q, Job{Key: "order:7", Token: "remind", When: After(time.Minute)})
		if other.Duplicate || other.ID == first.ID {
			t.Fatalf("other token = %+v", other)
		}
		// a generated token is the ID and can be used to re-enqueue idempotently
		gen := mustEnqueue(t, ctx, q, Job{Key: "order:7"})
		dup := mustEnqueue(t, ctx, q, Job{Key: "order:7", Token: gen.Token})
		if !dup.Duplicate || dup.ID != gen.ID {
			t.Fatalf("generated token re-enqueue = %+v (gen %+v)", dup, gen)
		}
		infos, err := lookup(ctx, q, "order:7")
		if err != nil || len(infos) != 3 {
			t.Fatalf("lookup = %d tasks, %v", len(infos), err)
		}
		// 100 goroutines, one (key, token): exactly one task
		var wg sync.WaitGroup
		ids := make([]string, 100)
		errs := make([]error, 100)
		for i := range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e, err := q.Enqueue(ctx, Job{Key: "order:race", Token: "t", When: After(time.Minute)})
				ids[i], errs[i] = e.ID, err
			}()
		}
		wg.Wait()
		for i := range 100 {
			if errs[i] != nil || ids[i] != ids[0] {
				t.Fatalf("goroutine %d: id %q err %v (first %q)", i, ids[i], errs[i], ids[0])
			}
		}
		infos, _ = lookup(ctx, q, "order:race")
		if n, _ := b.Client.ZCard(ctx, q.k.due).Result(); len(infos) != 1 || n != 4 {
			t.Fatalf("race key has %d tasks, due set %d (want 1, 4)", len(infos), n)
		}
		// duplicate reports the state: in flight
		tk := mustTake(t, ctx, q, 10)
		if len(tk.Tasks) != 1 || tk.Tasks[0].ID != gen.ID {
			t.Fatalf("take = %+v", tk.Tasks)
		}
		d2 := mustEnqueue(t, ctx, q, Job{Key: "order:7", Token: gen.Token})
		if !d2.Duplicate || d2.State != StateInFlight {
			t.Fatalf("in-flight duplicate = %+v", d2)
		}
	})
}

// Due by Redis TIME, not the client clock: on miniredis, driven with SetTime.
func TestDueByServerTime(t *testing.T) {
	t.Parallel()
	b := testredis.Mini(t)
	ctx := testCtx(t)
	base := time.Now().Add(24 * time.Hour).Truncate(time.Millisecond) // far from the client clock
	b.Mini.SetTime(base)
	q := newQ(t, b, Options{Lease: time.Second})
	e := mustEnqueue(t, ctx, q, Job{Key: "k", When: After(10 * time.Second)})
	if !e.Due.Equal(base.Add(10 * time.Second)) {
		t.Fatalf("due %v, want Redis TIME + 10s = %v", e.Due, base.Add(10*time.Second))
	}
	b.Mini.SetTime(base.Add(9999 * time.Millisecond))
	if bt := mustTake(t, ctx, q, 1); len(bt.Tasks) != 0 || !bt.NextDue.Equal(e.Due) {
		t.Fatalf("taken early: %+v", bt)
	}
	b.Mini.SetTime(base.Add(10 * time.Second))
	bt := mustTake(t, ctx, q, 1)
	if len(bt.Tasks) != 1 || bt.Tasks[0].Lateness() != 0 {
		t.Fatalf("not taken on time: %+v", bt)
	}
	// lease: expires by Redis TIME, sweep returns it, fence changes
	tk := bt.Tasks[0]
	if r, _ := q.Sweep(ctx, 10); r.Returned != 0 {
		t.Fatalf("swept a live lease: %+v", r)
	}
	b.Mini.SetTime(base.Add(11*time.Second + time.Millisecond))
	if r, err := q.Sweep(ctx, 10); err != nil || r.Returned != 1 {
		t.Fatalf("sweep = %+v, %v", r, err)
	}
	if err := q.ackTask(ctx, tk); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("ack after sweep = %v, want ErrLeaseLost", err)
	}
	bt2 := mustTake(t, ctx, q, 1)
	if len(bt2.Tasks) != 1 || bt2.Tasks[0].Attempt != 2 || bt2.Tasks[0].lease.Fence == tk.lease.Fence {
		t.Fatalf("redelivery = %+v", bt2.Tasks)
	}
	if _, err := q.retryAfter(ctx, tk, 0, nil); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("stale retry = %v", err)
	}
	if _, err := q.killTask(ctx, tk, nil); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("stale kill = %v", err)
	}
	if _, err := q.extend(ctx, tk, time.Second); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("stale extend = %v", err)
	}
	if err := q.ackTask(ctx, bt2.Tasks[0]); err != nil {
		t.Fatalf("ack of the new delivery: %v", err)
	}
}

// Leases and fencing, on every backend: a lease is exclusive; the stale
// holder is fenced.
func TestFencing(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{Lease: 200 * time.Millisecond}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		mustEnqueue(t, ctx, q, Job{Key: "k"})
		first := mustTake(t, ctx, q, 5).Tasks[0]
		if n := len(mustTake(t, ctx, q, 5).Tasks); n != 0 {
			t.Fatalf("second consumer got %d during the lease", n)
		}
		// Extend keeps it past the first deadline, up to the new one.
		extended, err := q.extend(ctx, first, 400*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		passServerTime(t, ctx, b, first.Deadline)
		r, err := q.Sweep(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if r.Returned != 0 {
			// Only a stall of this machine past the new deadline excuses it.
			if now, _ := b.Client.Time(ctx).Result(); now.Before(extended) {
				t.Fatalf("extended lease swept at %v, before its deadline %v", now, extended)
			}
			t.Logf("the sweep ran after the extended deadline (a stalled machine): it returned the task itself")
		} else {
			passServerTime(t, ctx, b, extended)
			if r, err := q.Sweep(ctx, 10); err != nil || r.Returned != 1 {
				t.Fatalf("sweep %+v %v", r, err)
			}
		}
		second := mustTake(t, ctx, q, 5).Tasks[0]
		for name, err := range map[string]error{
			"ack":   q.ackTask(ctx, first),
			"retry": func() error { _, e := q.retryAfter(ctx, first, 0, nil); return e }(),
			"kill":  func() error { _, e := q.killTask(ctx, first, nil); return e }(),
		} {
			if !errors.Is(err, ErrLeaseLost) {
				t.Fatalf("stale %s = %v, want ErrLeaseLost", name, err)
			}
		}
		if err := q.ackTask(ctx, second); err != nil {
			t.Fatal(err)
		}
		assertOnlyCounters(t, b, q)
	})
}

// Retries back off into a dead-letter set after MaxAttempts; the dead set
// can be listed, requeued and purged.
func TestRetryDeadLetter(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		var delays []int
		q := newQ(t, b, Options{MaxAttempts: 3, Backoff: func(a int) time.Duration {
			delays = append(delays, a)
			return time.Millisecond
		}})
		mustEnqueue(t, ctx, q, Job{Key: "pay:1", Payload: []byte("p")})
		var last *Task
		for attempt := 1; attempt <= 3; attempt++ {
			var bt takeBatch
			for deadline := time.Now().Add(2 * time.Second); len(bt.Tasks) == 0 && time.Now().Before(deadline); {
				time.Sleep(2 * time.Millisecond)
				bt = mustTake(t, ctx, q, 1)
			}
			if len(bt.Tasks) != 1 || bt.Tasks[0].Attempt != attempt {
				t.Fatalf("attempt %d: %+v", attempt, bt.Tasks)
			}
			last = bt.Tasks[0]
			if attempt > 1 && last.LastError != fmt.Sprintf("boom %d", attempt-1) {
				t.Fatalf("last error %q", last.LastError)
			}
			out, err := q.retry(ctx, last, fmt.Errorf("boom %d", attempt))
			want := outcomeRetried
			if attempt == 3 {
				want = outcomeDead
			}
			if err != nil || out != want {
				t.Fatalf("retry %d = %v, %v", attempt, out, err)
			}
		}
		if fmt.Sprint(delays) != "[1 2 3]" {
			t.Fatalf("backoff called with %v", delays)
		}
		page, err := listDead(ctx, q, 0, 10)
		if err != nil || page.Total != 1 || page.Tasks[0].LastError != "boom 3" || page.Tasks[0].Key != "pay:1" || string(page.Tasks[0].Payload) != "p" {
			t.Fatalf("dead page %+v, %v", page, err)
		}
		st, _ := q.Stats(ctx)
		if st.Dead != 1 || st.Retries != 2 || st.DeadLettered != 1 {
			t.Fatalf("stats %+v", st)
		}
		if n, err := q.Requeue(ctx, Selector{IDs: []string{page.Tasks[0].ID}}); err != nil || n != 1 {
			t.Fatalf("requeue %d %v", n, err)
		}
		bt := mustTake(t, ctx, q, 1)
		if len(bt.Tasks) != 1 || bt.Tasks[0].Attempt != 1 {
			t.Fatalf("requeued task %+v", bt.Tasks)
		}
		if out, err := q.killTask(ctx, bt.Tasks[0], Permanent(errors.New("bad"))); err != nil || out != outcomeDead {
			t.Fatalf("kill %v %v", out, err)
		}
		if n, err := q.Purge(ctx, Selector{All: true}); err != nil || n != 1 {
			t.Fatalf("purge %d %v", n, err)
		}
		assertOnlyCounters(t, b, q)
	})
}

// Cancel and reschedule by business key, in any state.
func TestCancelReschedule(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{MaxAttempts: 1}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		mustEnqueue(t, ctx, q, Job{Key: "o:1", Token: "a"})                         // will be in flight
		mustEnqueue(t, ctx, q, Job{Key: "o:1", Token: "b", When: After(time.Hour)}) // pending
		mustEnqueue(t, ctx, q, Job{Key: "o:2", When: After(time.Hour)})
		flying := mustTake(t, ctx, q, 10).Tasks
		if len(flying) != 1 {
			t.Fatalf("took %d", len(flying))
		}
		res, err := q.Cancel(ctx, Selector{Key: "o:1"})
		if err != nil || res != (CancelResult{Found: 2, Pending: 1, InFlight: 1}) {
			t.Fatalf("cancel = %+v, %v", res, err)
		}
		if res, _ := q.Cancel(ctx, Selector{Key: "o:1"}); res != (CancelResult{Already: 1}) {
			t.Fatalf("second cancel = %+v", res)
		}
		if d := mustEnqueue(t, ctx, q, Job{Key: "o:1", Token: "a"}); !d.Duplicate || d.State != StateCancelled {
			t.Fatalf("enqueue of cancelled = %+v", d)
		}
		// a cancelled in-flight task is never retried: Retry deletes it
		if out, err := q.retry(ctx, flying[0], errors.New("x")); err != nil || out != outcomeCancelled {
			t.Fatalf("retry of cancelled = %v %v", out, err)
		}
		// reschedule a pending one to now
		rr, err := q.Reschedule(ctx, Selector{Key: "o:2"}, After(0))
		if err != nil || rr.Moved != 1 {
			t.Fatalf("reschedule = %+v %v", rr, err)
		}
		got := mustTake(t, ctx, q, 10).Tasks
		if len(got) != 1 || got[0].Key != "o:2" {
			t.Fatalf("after reschedule took %+v", got)
		}
		if rr, _ := q.Reschedule(ctx, Selector{Key: "o:2"}, After(time.Hour)); rr.Moved != 0 || rr.InFlight != 1 {
			t.Fatalf("reschedule in flight = %+v", rr)
		}
		if res, _ := q.Cancel(ctx, Selector{Key: "o:2"}); res.InFlight != 1 {
			t.Fatalf("cancel o:2 = %+v", res)
		}
		if err := q.ackTask(ctx, got[0]); err != nil {
			t.Fatalf("ack of cancelled: %v", err)
		}
		if res, _ := q.Cancel(ctx, Selector{Key: "nothing"}); res.Found != 0 {
			t.Fatalf("cancel of unknown = %+v", res)
		}
		assertOnlyCounters(t, b, q)
	})
}

// A cancelled in-flight task whose lease expires is deleted by the sweep.
func TestSweepDeletesCancelled(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{Lease: 100 * time.Millisecond}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		mustEnqueue(t, ctx, q, Job{Key: "k"})
		tk := mustTake(t, ctx, q, 1).Tasks[0]
		if r, _ := q.Cancel(ctx, Selector{Key: "k"}); r.InFlight != 1 {
			t.Fatalf("cancel %+v", r)
		}
		passServerTime(t, ctx, b, tk.Deadline)
		if r, err := q.Sweep(ctx, 10); err != nil || r.Deleted != 1 {
			t.Fatalf("sweep %+v %v", r, err)
		}
		assertOnlyCounters(t, b, q)
	})
}

// Expired at MaxAttempts → dead on sweep.
func TestSweepDeadLetters(t *testing.T) {
	t.Parallel()
	eachQueue(t, Options{Lease: 50 * time.Millisecond, MaxAttempts: 1}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		mustEnqueue(t, ctx, q, Job{Key: "k"})
		tk := mustTake(t, ctx, q, 1).Tasks[0]
		passServerTime(t, ctx, b, tk.Deadline)
		if r, err := q.Sweep(ctx, 10); err != nil || r.Dead != 1 {
			t.Fatalf("sweep %+v %v", r, err)
		}
		p, _ := listDead(ctx, q, 0, 1)
		if len(p.Tasks) != 1 || p.Tasks[0].LastError != "delay: lease expired" {
			t.Fatalf("dead %+v", p)
		}
	})
}

var _ = context.Background
