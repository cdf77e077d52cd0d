package budget_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/testredis"
)

// Promises about Reserve's outcome under faults that a first version
// broke: each test here failed before its fix (or its doc's correction).

// TestFaultUnknownHeldReplyAloneCancel: a call sent alone whose ctx is
// cancelled (no deadline) while its reply is held. go-redis bounds a
// read by deadlines, not by cancellation, so the call waits for its
// reply, as ErrUnknown's doc says: released, it answers the hold (New
// true, counted once); cut, ErrUnknown matching context.Canceled.
func TestFaultUnknownHeldReplyAloneCancel(t *testing.T) {
	for _, cut := range []bool{false, true} {
		t.Run(fmt.Sprint("cut=", cut), func(t *testing.T) {
			var grants atomic.Int64
			f, bg, ctx, release := batched(t, 100, counted(&grants))
			if o := await(t, release()); o.err != nil {
				t.Fatal(o.err)
			}
			h := f.Proxy.HoldNext(faultproxy.Contains("held-"))
			t.Cleanup(h.Release)
			short, cancel := context.WithCancel(ctx)
			gone := reserveAsync(short, bg, unknownReq("held-gone"))
			waitHeld(t, h)
			cancel()
			if cut {
				f.Proxy.CutAll()
			}
			h.Release()
			o := await(t, gone)
			switch {
			case cut && (!errors.Is(o.err, budget.ErrUnknown) || !errors.Is(o.err, context.Canceled)):
				t.Errorf("cut after the cancel: %+v, %v: want ErrUnknown matching context.Canceled", o.res, o.err)
			case !cut && (o.err != nil || !o.res.New):
				t.Errorf("released after the cancel: %+v, %v: want the reply's new hold", o.res, o.err)
			}
			res, err := bg.Reserve(ctx, unknownReq("held-gone"))
			if err != nil || res.New || res.State != budget.Held {
				t.Errorf("again: %+v, %v: want the hold, not new", res, err)
			}
			want := int64(3) // warm, first, and held-gone when its reply came
			if cut {
				want = 2
			}
			if g := grants.Load(); g != want {
				t.Errorf("%d grants observed, want %d", g, want)
			}
			if left := remaining(t, ctx, bg); left != 97 {
				t.Errorf("remaining %d, want 97", left)
			}
		})
	}
}

// TestFaultUnknownBusyAfterCut: see TestFaultUnknownErrorAfterCut. The
// retry after the cut meets BUSY, which is returned as it is though the
// cut try made the hold.
func TestFaultUnknownBusyAfterCut(t *testing.T) {
	for _, tc := range []afterCutCase{{"alone", 1, "busy"}, {"batch", 10, "busy"}} {
		t.Run(tc.name, func(t *testing.T) { afterCut(t, tc) })
	}
}

// TestFaultUnknownWrongTypeBatch: see TestFaultUnknownWrongType. A
// string at the record key of one order fails every caller of its batch
// with WRONGTYPE; a string at the unrep key stops the script between its
// writes, after the first request's record and before the holds set: the
// caller gets WRONGTYPE, yet its hold is recorded and counted and no
// purge will ever end it.
func TestFaultUnknownWrongTypeBatch(t *testing.T) {
	for _, tc := range []wrongTypeCase{
		{"record", func(bg *budget.Budget) string { return bg.Keys()[0] + "o:wt-bad" }},
		{"unrep", func(bg *budget.Budget) string { return bg.Keys()[3] }},
	} {
		t.Run(tc.name, func(t *testing.T) { wrongType(t, tc) })
	}
}

// TestFaultUnknownRedisDown: nothing listens where the client dials
// (the proxy closed; the server still up), so no try of Reserve's script
// is sent. go-redis's tries are not told apart (a dial that fails may
// follow a try that ran), so the answer is ErrUnknown wrapping the dial
// error, as its doc says; the server holds nothing.
func TestFaultUnknownRedisDown(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
	}{{"alone", 1}, {"batch", 10}} {
		t.Run(tc.name, func(t *testing.T) {
			f := testredis.StartFaulty(t)
			ctx := testredis.Ctx(t)
			bg, direct, _ := faultyBudget(t, ctx, f, 100, budget.Options{})
			if err := f.Proxy.Close(); err != nil {
				t.Fatal(err)
			}
			var chs []<-chan outcomeOf
			for i := range tc.n {
				chs = append(chs, reserveAsync(ctx, bg, unknownReq(fmt.Sprint("down-", i))))
			}
			for i, ch := range chs {
				o := await(t, ch)
				if o.err == nil {
					t.Fatalf("caller %d: %+v with Redis unreachable", i, o.res)
				}
				var op *net.OpError
				if !errors.Is(o.err, budget.ErrUnknown) || !errors.As(o.err, &op) || op.Op != "dial" {
					t.Errorf("caller %d: %v: want ErrUnknown wrapping the dial error", i, o.err)
				}
			}
			for i := range tc.n {
				if _, err := direct.Order(ctx, fmt.Sprint("down-", i)); !errors.Is(err, budget.ErrNotFound) {
					t.Errorf("down-%d on the server: %v, want ErrNotFound", i, err)
				}
			}
		})
	}
}

// TestFaultUnknownDeadlineAtDispatch: callers queued behind a held
// reply, with one deadline; the held reply is released just around it,
// 300 times. A caller whose deadline ends as its batch is taken and
// written may get ErrUnknown though the write then failed and nothing
// ran (ErrUnknown's doc says so); each answer is still true of the
// server: a hold answered is there, a ctx error alone means none, and
// the same Reserve again settles an ErrUnknown.
func TestFaultUnknownDeadlineAtDispatch(t *testing.T) {
	f, bg, ctx, release := batched(t, 100000, budget.Options{})
	if o := await(t, release()); o.err != nil {
		t.Fatal(o.err)
	}
	const rounds = 300
	raced := 0
	for it := range rounds {
		h := f.Proxy.HoldNext(faultproxy.Contains("gate"))
		gate := reserveAsync(ctx, bg, unknownReq(fmt.Sprint("gate", it)))
		waitHeld(t, h)
		d := time.Now().Add(20 * time.Millisecond)
		short, cancel := context.WithDeadline(ctx, d)
		var chs []<-chan outcomeOf
		for i := range 5 {
			chs = append(chs, reserveAsync(short, bg, unknownReq(fmt.Sprint("race", it, "-", i))))
		}
		// On a busy machine a call can reach its deadline before all 5
		// are queued; that round tests less, and its answers are checked
		// all the same.
		if queuedBy(bg, 5, d) {
			raced++
		}
		// Aims the release at up to 2ms before the deadline: the race
		// between them is what is tested.
		time.Sleep(time.Until(d) - time.Duration(it%40)*50*time.Microsecond)
		h.Release()
		if o := await(t, gate); o.err != nil {
			t.Fatal(o.err)
		}
		for i, ch := range chs {
			order := fmt.Sprint("race", it, "-", i)
			o := await(t, ch)
			_, err := bg.Order(ctx, order)
			switch {
			case o.err == nil && err != nil:
				t.Errorf("%s: answered a hold the server does not have: %v", order, err)
			case o.err != nil && !errors.Is(o.err, budget.ErrUnknown) && !errors.Is(err, budget.ErrNotFound):
				t.Errorf("%s: %v, yet the server holds it (%v)", order, o.err, err)
			}
		}
		cancel()
	}
	if raced < rounds/3 {
		t.Errorf("all 5 calls were queued before their deadline in %d of %d rounds: the race was barely tried", raced, rounds)
	}
}

// queuedBy waits until n calls are queued in bg, or the deadline passes
// (false).
func queuedBy(bg *budget.Budget, n int, deadline time.Time) bool {
	for budget.Queued(bg) != n {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Microsecond) // a poll with a deadline
	}
	return true
}
