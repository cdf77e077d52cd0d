package delay

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

// TestDoneTTL: with Options.DoneTTL, an acked task's (key, token) stays
// known: enqueueing it again (alone or in a batch) is a duplicate in state
// done, a second ack is ErrNotFound, Lookup shows it, Cancel leaves it,
// and a generated token or a task cancelled in flight keeps nothing. After
// DoneTTL the sweep deletes the tombstone, record and index entry alike,
// and the pair makes a new task.
func TestDoneTTL(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		const ttl = 400 * time.Millisecond
		now := time.Now()
		setTime(b, now)
		q := newQ(t, b, Options{DoneTTL: ttl})

		first := mustEnqueue(t, ctx, q, Job{Key: "order:1", Token: "expire", Payload: []byte("p")})
		mustEnqueue(t, ctx, q, Job{Key: "order:2"}) // generated token
		mustEnqueue(t, ctx, q, Job{Key: "order:3", Token: "expire"})
		bt := mustTake(t, ctx, q, 10)
		if len(bt.Tasks) != 3 {
			t.Fatalf("took %d, want 3", len(bt.Tasks))
		}
		if _, err := q.Cancel(ctx, Selector{Key: "order:3"}); err != nil { // in flight: marked
			t.Fatal(err)
		}
		mustAckMany(t, ctx, q, bt.Tasks)
		if err := q.ackTask(ctx, bt.Tasks[0]); !errors.Is(err, ErrNotFound) {
			t.Fatalf("second ack: %v, want ErrNotFound", err)
		}

		st, err := q.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Done != 1 || st.Pending != 0 || st.InFlight != 0 {
			t.Fatalf("stats %+v: want 1 tombstone and nothing else", st)
		}
		again := mustEnqueue(t, ctx, q, Job{Key: "order:1", Token: "expire", When: After(time.Hour)})
		if !again.Duplicate || again.State != StateDone || again.ID != first.ID {
			t.Fatalf("re-enqueue after ack: %+v, want a duplicate of %s in state done", again, first.ID)
		}
		res, err := q.EnqueueBatch(ctx, []Job{{Key: "order:1", Token: "expire"}, {Key: "order:1", Token: "remind"}})
		if err != nil || res[0].Err != nil || res[1].Err != nil {
			t.Fatalf("batch: %v %+v", err, res)
		}
		if !res[0].Duplicate || res[0].State != StateDone || res[1].Duplicate {
			t.Fatalf("batch: %+v, want a done duplicate and a new task", res)
		}
		info, err := lookup(ctx, q, "order:1")
		if err != nil || len(info) != 2 || info[0].State != StateDone || len(info[0].Payload) != 0 {
			t.Fatalf("Lookup: %+v %v, want the tombstone (no payload) and the new task", info, err)
		}
		cr, err := q.Cancel(ctx, Selector{Key: "order:1", Token: "expire"})
		if err != nil || cr.Found != 0 {
			t.Fatalf("Cancel of a finished task: %+v %v, want nothing found", cr, err)
		}
		for _, k := range []string{"order:2", "order:3"} {
			if e := mustEnqueue(t, ctx, q, Job{Key: k, Token: "expire", When: After(time.Hour)}); e.Duplicate {
				t.Fatalf("%s left a tombstone: %+v", k, e)
			}
		}

		// past the end (the ack came before st's server time): the sweep
		// deletes the tombstone, and only it
		passServerTime(t, ctx, b, st.ServerTime.Add(ttl))
		sw, err := q.Sweep(ctx, 100)
		if err != nil || sw.Tombstones != 1 {
			t.Fatalf("sweep: %+v %v, want 1 tombstone deleted", sw, err)
		}
		info, err = lookup(ctx, q, "order:1")
		if err != nil || len(info) != 1 || info[0].State != StatePending {
			t.Fatalf("Lookup after the end: %+v %v, want only the pending task", info, err)
		}
		if e := mustEnqueue(t, ctx, q, Job{Key: "order:1", Token: "expire"}); e.Duplicate {
			t.Fatalf("re-enqueue after the end: %+v, want a new task", e)
		}

		// every task finished, every tombstone past: nothing left but counters
		setTime(b, now.Add(ttl+200*time.Millisecond))
		for {
			bt := mustTake(t, ctx, q, 100)
			if len(bt.Tasks) == 0 {
				break
			}
			for _, tk := range bt.Tasks {
				if err := q.ackTask(ctx, tk); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, k := range []string{"order:1", "order:2", "order:3"} {
			if _, err := q.Cancel(ctx, Selector{Key: k}); err != nil {
				t.Fatal(err)
			}
		}
		acked, err := b.Client.Time(ctx).Result() // every ack came before this
		if err != nil {
			t.Fatal(err)
		}
		passServerTime(t, ctx, b, acked.Add(ttl))
		if _, err := q.Sweep(ctx, 100); err != nil {
			t.Fatal(err)
		}
		keys, err := stateKeys(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if k != q.k.ctr && k != q.k.stats && k != q.k.wake && (k != q.k.idx || indexEntries(t, b, q) != 0) {
				t.Fatalf("left after every task and tombstone ended: %s (all: %v)", k, keys)
			}
		}
	})
}

// TestDoneTTLOption: the option's bad values are refused.
func TestDoneTTLOption(t *testing.T) {
	t.Parallel()
	b := testredis.Mini(t)
	for _, d := range []time.Duration{-time.Millisecond, time.Microsecond} {
		if _, err := New(b.Client, "q", Options{DoneTTL: d}); !errors.Is(err, &ValidationError{Field: "options"}) {
			t.Fatalf("DoneTTL %v: %v, want invalid options", d, err)
		}
	}
	if flagDone != 4 {
		t.Fatalf("flagDone %d: lib.lua's F_DONE is 4", flagDone)
	}
}

// TestDoneTTLWorker: a worker's acks keep tombstones, and its own sweep
// (armed by the take's NextExpiry, which includes the first tombstone's
// end) deletes them once they end, with nothing else running.
func TestDoneTTLWorker(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		q := newQ(t, b, Options{DoneTTL: 2 * time.Second})
		w, err := newWorker(q, func(context.Context, *Task) error { return nil }, workerOpts{Concurrency: 4})
		if err != nil {
			t.Fatal(err)
		}
		stop := runFunc(t, w.Run)
		jobs := jobsOf(50, func(i int) Job { return Job{Key: fmt.Sprintf("order:%d", i), Token: "expire"} })
		if _, err := q.EnqueueBatch(ctx, jobs); err != nil {
			t.Fatal(err)
		}
		stats := func() Stats {
			st, err := q.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		waitFor(t, 10*time.Second, "50 acks", func() bool { return stats().Acked == 50 })
		if e := mustEnqueue(t, ctx, q, Job{Key: "order:7", Token: "expire"}); !e.Duplicate || e.State != StateDone {
			t.Fatalf("re-enqueue of a finished task: %+v", e)
		}
		waitFor(t, 10*time.Second, "the worker's sweep to end the tombstones", func() bool { return stats().Done == 0 })
		if err := stop(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v, want context.Canceled", err)
		}
		assertOnlyCounters(t, b, q)
	})
}
