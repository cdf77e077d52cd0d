package budget_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/testredis"
)

// counted is an Observer that counts grants.
func counted(n *atomic.Int64) budget.Options {
	return budget.Options{Observer: budget.Observer{OnGrant: func(string, string) { n.Add(1) }}}
}

// remaining is what is left of promotion "p"'s cap.
func remaining(t *testing.T, ctx context.Context, bg *budget.Budget) int64 {
	t.Helper()
	left, err := bg.Remaining(ctx, nil, "p")
	if err != nil {
		t.Fatalf("remaining: %v", err)
	}
	return left["p"].Uses
}

// unknownReq is order name's request of one use of "p".
func unknownReq(name string) budget.Request {
	return budget.Request{Order: name, Lines: line("p", 1, 0), Hold: time.Hour}
}

// TestFaultUnknownCutTries: 1 to 4 of go-redis's tries of a script are
// cut, alone and in a batch. Fewer than 4: every caller gets its hold as
// new and the Observer counts it once. All 4: ErrUnknown (not a ctx
// error), the Observer does not count it, and the same Reserve again
// answers the hold (New false) without counting it. The counter holds
// each grant once.
func TestFaultUnknownCutTries(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int // callers: 1 goes alone
		cuts int
	}{
		{"alone 1", 1, 1}, {"alone 3", 1, 3}, {"alone 4", 1, 4},
		{"batch 1", 20, 1}, {"batch 3", 20, 3}, {"batch 4", 20, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var grants atomic.Int64
			f, bg, ctx, release := batched(t, 100, counted(&grants))
			req := func(i int) budget.Request { return unknownReq(fmt.Sprint("cut-", i)) }
			var chs []<-chan outcomeOf
			if tc.n > 1 {
				for i := range tc.n {
					chs = append(chs, reserveAsync(ctx, bg, req(i)))
				}
				queuedBehind(t, bg, tc.n)
			}
			f.Proxy.CutNext(tc.cuts, faultproxy.Contains("cut-"))
			if o := await(t, release()); o.err != nil {
				t.Fatal(o.err)
			}
			if tc.n == 1 {
				chs = append(chs, reserveAsync(ctx, bg, req(0)))
			}
			for i, ch := range chs {
				o := await(t, ch)
				if tc.cuts < 4 && (o.err != nil || !o.res.New) {
					t.Errorf("caller %d: %+v, %v: want a new hold", i, o.res, o.err)
				}
				var opErr *net.OpError
				if tc.cuts == 4 && (!errors.Is(o.err, budget.ErrUnknown) || errors.Is(o.err, context.Canceled) || errors.Is(o.err, context.DeadlineExceeded) ||
					!(errors.Is(o.err, io.EOF) || errors.As(o.err, &opErr))) {
					t.Errorf("caller %d: %+v, %v: want ErrUnknown wrapping the transport error", i, o.res, o.err)
				}
			}
			if f.Proxy.Cuts() != int64(tc.cuts) {
				t.Fatalf("%d cuts, want %d", f.Proxy.Cuts(), tc.cuts)
			}
			wantGrants := int64(2 + tc.n) // warm, first, and the n
			if tc.cuts == 4 {
				wantGrants = 2
			}
			if g := grants.Load(); g != wantGrants {
				t.Errorf("%d grants observed, want %d", g, wantGrants)
			}
			for i := range tc.n {
				res, err := bg.Reserve(ctx, req(i))
				if err != nil || res.New || res.State != budget.Held {
					t.Errorf("again %d: %+v, %v: want the hold, not new", i, res, err)
				}
			}
			if g := grants.Load(); g != wantGrants {
				t.Errorf("after the same Reserve again: %d grants observed, want %d", g, wantGrants)
			}
			if left, want := remaining(t, ctx, bg), int64(100-2-tc.n); left != want {
				t.Errorf("remaining %d, want %d", left, want)
			}
		})
	}
}

// TestFaultUnknownHeldReply: a Reserve's reply is held past its caller's
// ctx (a deadline, or a cancel with none), then released or cut (every
// connection closed). The caller gets ErrUnknown matching ctx's error,
// promptly (before the reply). Alone, the grant is not observed; in a
// batch with a caller that has no deadline, the batch's reply settles it
// (Observer once). The same Reserve again answers the hold (New false).
// A call alone cancelled with no deadline is not here: it waits for the
// reply (go-redis bounds a read by deadlines, not by cancellation).
func TestFaultUnknownHeldReply(t *testing.T) {
	for _, tc := range []heldReplyCase{
		{"alone deadline release", false, false, false},
		{"alone deadline cut", false, false, true},
		{"batch deadline release", true, false, false},
		{"batch deadline cut", true, false, true},
		{"batch cancel release", true, true, false},
		{"batch cancel cut", true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) { heldReply(t, tc) })
	}
}

type heldReplyCase struct {
	name   string
	batch  bool
	cancel bool // a cancel with no deadline, else a deadline
	cut    bool // the held reply is cut, else released
}

func heldReply(t *testing.T, tc heldReplyCase) {
	t.Helper()
	var grants atomic.Int64
	f, bg, ctx, release := batched(t, 100, counted(&grants))
	short, cancel := context.WithCancel(ctx)
	if !tc.cancel {
		short, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
	}
	t.Cleanup(cancel)
	var h *faultproxy.Hold
	var gone, other <-chan outcomeOf
	if tc.batch { // queued behind "first": one batch of two
		gone = reserveAsync(short, bg, unknownReq("held-gone"))
		queuedBehind(t, bg, 1)
		other = reserveAsync(ctx, bg, unknownReq("held-other"))
		queuedBehind(t, bg, 2)
		h = f.Proxy.HoldNext(faultproxy.Contains("held-"))
		if o := await(t, release()); o.err != nil {
			t.Fatal(o.err)
		}
	} else {
		if o := await(t, release()); o.err != nil {
			t.Fatal(o.err)
		}
		h = f.Proxy.HoldNext(faultproxy.Contains("held-"))
		gone = reserveAsync(short, bg, unknownReq("held-gone"))
	}
	t.Cleanup(h.Release)
	waitHeld(t, h)
	cancel()
	var o outcomeOf
	select {
	case o = <-gone:
	case <-time.After(time.Second):
		h.Release()
		o = await(t, gone)
		t.Errorf("ctx ended with the reply held: no answer in 1s; after release: %+v, %v", o.res, o.err)
	}
	if !errors.Is(o.err, budget.ErrUnknown) || !errors.Is(o.err, short.Err()) {
		t.Errorf("reply held past ctx: %+v, %v: want ErrUnknown matching %v", o.res, o.err, short.Err())
	}
	if tc.cut {
		f.Proxy.CutAll()
	}
	h.Release()
	want := int64(2) // warm, first
	if tc.batch {
		if o := await(t, other); o.err != nil || !o.res.New {
			t.Errorf("other in the batch: %+v, %v: want a new hold", o.res, o.err)
		}
		want = 4 // and both of the batch: gone's settled by the reply
		deadline := time.Now().Add(10 * time.Second)
		for grants.Load() < want && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond) // a poll with a deadline
		}
	}
	res, err := bg.Reserve(ctx, unknownReq("held-gone"))
	if err != nil || res.New || res.State != budget.Held {
		t.Errorf("again: %+v, %v: want the hold, not new", res, err)
	}
	if g := grants.Load(); g != want {
		t.Errorf("%d grants observed, want %d", g, want)
	}
	n := int64(3)
	if tc.batch {
		n = 4
	}
	if left := remaining(t, ctx, bg); left != 100-n {
		t.Errorf("remaining %d, want %d", left, 100-n)
	}
}

// faultyBudget is a budget on f's proxied client, with a cap of limit
// uses of "p", and the same budget on a client straight to the server.
func faultyBudget(t *testing.T, ctx context.Context, f *testredis.Faulty, limit int64, opts budget.Options) (viaProxy, direct *budget.Budget, raw *redis.Client) {
	t.Helper()
	prefix := testredis.Prefix(t)
	viaProxy = newBudget(t, ctx, &testredis.Backend{Client: f.Cut, Prefix: prefix}, opts, capPromo(limit, false))
	raw = f.Server.Client(nil)
	direct, err := budget.New(raw, "shop", budget.Options{Prefix: prefix, Promotions: []budget.Promotion{capPromo(limit, false)}})
	if err != nil {
		t.Fatal(err)
	}
	// The script is loaded first, so every call is one EVALSHA.
	if _, err := viaProxy.Reserve(ctx, unknownReq("warm")); err != nil {
		t.Fatal(err)
	}
	return viaProxy, direct, raw
}

// TestFaultUnknownErrorAfterCut: the try that ran a Reserve's script has
// its reply cut; go-redis sends it again and that try meets a fault of
// Redis. OOM (maxmemory 1): the retry writes nothing, so it answers the
// hold the first try made (New true). BUSY (another client's script runs
// past busy-reply-threshold; afterCut's "busy"): the retry's error reply
// says nothing of the first try, which made the hold, so per ErrUnknown's
// doc ("no reply of Redis says what it did") the caller should get
// ErrUnknown; it gets the BUSY reply, so that case is not here. The same
// Reserve again answers the hold either way.
func TestFaultUnknownErrorAfterCut(t *testing.T) {
	for _, tc := range []afterCutCase{{"oom alone", 1, "oom"}, {"oom batch", 10, "oom"}} {
		t.Run(tc.name, func(t *testing.T) { afterCut(t, tc) })
	}
}

type afterCutCase struct {
	name  string
	n     int
	fault string // "oom" or "busy"
}

func afterCut(t *testing.T, tc afterCutCase) {
	t.Helper()
	f := testredis.StartFaulty(t)
	ctx := testredis.Ctx(t)
	bg, _, raw := faultyBudget(t, ctx, f, 100, budget.Options{})
	var chs []<-chan outcomeOf
	h := f.Proxy.HoldNext(faultproxy.Contains("after-"))
	t.Cleanup(h.Release)
	if tc.n == 1 {
		chs = append(chs, reserveAsync(ctx, bg, unknownReq("after-0")))
		waitHeld(t, h)
	} else {
		first := f.Proxy.HoldNext(faultproxy.Contains("first"))
		t.Cleanup(first.Release)
		fch := reserveAsync(ctx, bg, unknownReq("first"))
		waitHeld(t, first)
		for i := range tc.n {
			chs = append(chs, reserveAsync(ctx, bg, unknownReq(fmt.Sprint("after-", i))))
		}
		queuedBehind(t, bg, tc.n)
		first.Release()
		if o := await(t, fch); o.err != nil {
			t.Fatal(o.err)
		}
		waitHeld(t, h)
	}
	// The script ran: the holds are made. Its reply is lost, and
	// the next try meets the fault.
	busyDone := make(chan error, 1)
	switch tc.fault {
	case "oom":
		if err := raw.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
			t.Fatal(err)
		}
	case "busy":
		if err := raw.ConfigSet(ctx, "busy-reply-threshold", "10").Err(); err != nil {
			t.Fatal(err)
		}
		busy := f.Server.Client(nil)
		go func() { busyDone <- busy.Eval(ctx, "while true do end return 1", nil).Err() }()
		probe := f.Server.Client(nil)
		deadline := time.Now().Add(10 * time.Second)
		for err := probe.Ping(ctx).Err(); err == nil || !redis.HasErrorPrefix(err, "BUSY"); err = probe.Ping(ctx).Err() {
			if time.Now().After(deadline) {
				t.Fatalf("server not busy after 10s: %v", err)
			}
			time.Sleep(time.Millisecond) // a poll with a deadline
		}
	}
	f.Proxy.CutAll()
	for i, ch := range chs {
		o := await(t, ch)
		if tc.fault == "oom" && (o.err != nil || !o.res.New) {
			t.Errorf("caller %d: %+v, %v: want the hold the cut try made, as new", i, o.res, o.err)
		}
		if tc.fault == "busy" && !errors.Is(o.err, budget.ErrUnknown) {
			t.Errorf("caller %d: %+v, %v: want ErrUnknown (the cut try made the hold)", i, o.res, o.err)
		}
	}
	switch tc.fault {
	case "oom":
		if err := raw.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
			t.Fatal(err)
		}
	case "busy":
		if err := raw.ScriptKill(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-busyDone:
		case <-time.After(10 * time.Second):
			t.Fatal("busy script not killed in 10s")
		}
	}
	for i := range tc.n {
		res, err := bg.Reserve(ctx, unknownReq(fmt.Sprint("after-", i)))
		if err != nil || res.New {
			t.Errorf("again %d: %+v, %v: want the hold the cut try made", i, res, err)
		}
	}
	if left, want := remaining(t, ctx, bg), int64(100-1-tc.n-min(tc.n-1, 1)); left != want {
		t.Errorf("remaining %d, want %d", left, want)
	}
}

// TestFaultUnknownRestartMidBatch: the server is SIGKILLed and restarted
// (no persistence) while a batch's reply is held, and the reply is cut:
// the holds it made are gone with the epoch. Each caller gets ErrLost (go-redis's retry ran on
// the empty server) or ErrUnknown (its retries found no server), never a
// hold; the same Reserve again answers ErrLost until Rebuild, then a new
// hold; the Observer counts only grants whose reply came.
func TestFaultUnknownRestartMidBatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
	}{{"alone", 1}, {"batch", 10}} {
		t.Run(tc.name, func(t *testing.T) {
			var grants atomic.Int64
			f, bg, ctx, release := batched(t, 100, counted(&grants))
			h := f.Proxy.HoldNext(faultproxy.Contains("rs-"))
			t.Cleanup(h.Release)
			var chs []<-chan outcomeOf
			if tc.n > 1 {
				for i := range tc.n {
					chs = append(chs, reserveAsync(ctx, bg, unknownReq(fmt.Sprint("rs-", i))))
				}
				queuedBehind(t, bg, tc.n)
			}
			if o := await(t, release()); o.err != nil {
				t.Fatal(o.err)
			}
			if tc.n == 1 {
				chs = append(chs, reserveAsync(ctx, bg, unknownReq("rs-0")))
			}
			waitHeld(t, h)
			f.Server.Restart()
			// The held reply reached the proxy before the kill: cut it, so
			// go-redis sends the script again to the empty server.
			f.Proxy.CutAll()
			h.Release()
			for i, ch := range chs {
				if o := await(t, ch); !errors.Is(o.err, budget.ErrLost) && !errors.Is(o.err, budget.ErrUnknown) {
					t.Errorf("caller %d: %+v, %v: want ErrLost or ErrUnknown", i, o.res, o.err)
				}
			}
			if g := grants.Load(); g != 2 {
				t.Errorf("%d grants observed, want 2 (warm, first)", g)
			}
			if _, err := bg.Reserve(ctx, unknownReq("rs-0")); !errors.Is(err, budget.ErrLost) {
				t.Errorf("again before Rebuild: %v, want ErrLost", err)
			}
			if _, err := bg.Rebuild(ctx, nil); err != nil {
				t.Fatal(err)
			}
			for i := range tc.n {
				res, err := bg.Reserve(ctx, unknownReq(fmt.Sprint("rs-", i)))
				if err != nil || !res.New {
					t.Errorf("again after Rebuild %d: %+v, %v: want a new hold", i, res, err)
				}
			}
			if left := remaining(t, ctx, bg); left != int64(100-tc.n) {
				t.Errorf("remaining %d, want %d", left, 100-tc.n)
			}
		})
	}
}

// TestUnknownCtxEndedBefore: a ctx that ended before the call (cancelled,
// cancelled with a cause, past its deadline), alone and while a batch is
// in flight, answers ctx's error, never ErrUnknown, and no hold is made.
func TestUnknownCtxEndedBefore(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func(parent context.Context) context.Context
	}{
		{"cancelled", func(p context.Context) context.Context {
			c, cancel := context.WithCancel(p)
			cancel()
			return c
		}},
		{"cause", func(p context.Context) context.Context {
			c, cancel := context.WithCancelCause(p)
			cancel(errors.New("shopper left"))
			return c
		}},
		{"deadline", func(p context.Context) context.Context {
			c, cancel := context.WithDeadline(p, time.Now().Add(-time.Second))
			cancel()
			return c
		}},
	} {
		for _, inFlight := range []bool{false, true} {
			t.Run(fmt.Sprint(tc.name, " in flight ", inFlight), func(t *testing.T) {
				_, bg, ctx, release := batched(t, 100, budget.Options{})
				if !inFlight {
					if o := await(t, release()); o.err != nil {
						t.Fatal(o.err)
					}
				}
				c := tc.ctx(ctx)
				var o outcomeOf
				o.res, o.err = bg.Reserve(c, unknownReq("ended"))
				switch {
				case !errors.Is(o.err, c.Err()) || errors.Is(o.err, budget.ErrUnknown):
					t.Errorf("%+v, %v: want %v alone", o.res, o.err, c.Err())
				}
				if inFlight {
					if o := await(t, release()); o.err != nil {
						t.Fatal(o.err)
					}
				}
				if _, err := bg.Order(ctx, "ended"); !errors.Is(err, budget.ErrNotFound) {
					t.Errorf("ended: %v, want ErrNotFound (nothing sent)", err)
				}
			})
		}
	}
}
