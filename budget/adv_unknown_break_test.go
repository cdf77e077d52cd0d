package budget_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/testredis"
)

// Breaks of documented promises about Reserve's outcome under faults:
// each test here fails on the library as it is.

// TestFaultUnknownHeldReplyAloneCancel: a call sent alone whose ctx is
// cancelled (no deadline) while its reply is held. The doc: "A call sent
// alone whose ctx ends before its reply gets ErrUnknown". It waits for
// the reply instead (go-redis bounds a read by deadlines, not by
// cancellation) and answers it (a hold, New true), or with no reply,
// ErrUnknown only at go-redis's read timeout.
func TestFaultUnknownHeldReplyAloneCancel(t *testing.T) {
	for _, tc := range []heldReplyCase{
		{"release", false, true, false},
		{"cut", false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) { heldReply(t, tc) })
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
// is sent. ErrUnknown's doc defines it as "Reserve's script was sent and
// no reply of Redis says what it did"; here nothing was sent and the
// outcome is known (no hold, checked on the server), so ErrUnknown would
// misdescribe it.
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
				if errors.Is(o.err, budget.ErrUnknown) {
					t.Errorf("caller %d: %v: ErrUnknown says the script was sent; nothing was", i, o.err)
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

// TestFaultUnknownDeadlineAtDispatch: callers queued behind a held reply,
// with one deadline; the held reply is released just around it, 300
// times. The doc: "A ctx that ended before anything was sent answers
// ctx's error alone". Some callers get ErrUnknown though no hold was made
// (the cap is far): their deadline ended as their batch was taken, before
// the script was written.
func TestFaultUnknownDeadlineAtDispatch(t *testing.T) {
	f, bg, ctx, release := batched(t, 100000, budget.Options{})
	if o := await(t, release()); o.err != nil {
		t.Fatal(o.err)
	}
	unknown := 0
	for it := range 300 {
		h := f.Proxy.HoldNext(faultproxy.Contains("gate"))
		gate := reserveAsync(ctx, bg, unknownReq(fmt.Sprint("gate", it)))
		waitHeld(t, h)
		d := time.Now().Add(20 * time.Millisecond)
		short, cancel := context.WithDeadline(ctx, d)
		var chs []<-chan outcomeOf
		for i := range 5 {
			chs = append(chs, reserveAsync(short, bg, unknownReq(fmt.Sprint("race", it, "-", i))))
		}
		queuedBehind(t, bg, 5)
		// Aims the release at up to 2ms before the deadline: the race
		// between them is what is tested.
		time.Sleep(time.Until(d) - time.Duration(it%40)*50*time.Microsecond)
		h.Release()
		if o := await(t, gate); o.err != nil {
			t.Fatal(o.err)
		}
		for i, ch := range chs {
			o := await(t, ch)
			if !errors.Is(o.err, budget.ErrUnknown) {
				continue
			}
			if _, err := bg.Order(ctx, fmt.Sprint("race", it, "-", i)); errors.Is(err, budget.ErrNotFound) {
				unknown++
				if unknown <= 3 {
					t.Errorf("race%d-%d: %v, and no hold was made: want %v alone", it, i, o.err, context.DeadlineExceeded)
				}
			}
		}
		cancel()
	}
	if unknown > 0 {
		t.Errorf("%d of %d callers got ErrUnknown with nothing sent", unknown, 300*5)
	}
}
