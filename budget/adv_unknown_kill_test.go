package budget_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/testredis"
)

// TestFaultUnknownWrongType: a budget key holds a string (an operator's
// mistake). Reserve gets Redis's WRONGTYPE reply as it is, not
// ErrUnknown, and nothing passes the cap. wrongType checks besides that a
// caller whose own keys are fine, in the batch of one whose record key
// is wrong, gets its own answer (the doc: each judged all or none on its
// own), and that an error reply leaves no hold behind that the holds set
// does not list (the design: a script stopped between its writes "could
// only count a hold it did not record"). A string at a counter key holds
// all of it; at a record key or at unrep it does not, so those are not
// here.
func TestFaultUnknownWrongType(t *testing.T) {
	for _, tc := range []wrongTypeCase{
		{"counter", func(bg *budget.Budget) string { return bg.Keys()[0] + "c:p" }},
	} {
		t.Run(tc.name, func(t *testing.T) { wrongType(t, tc) })
	}
}

type wrongTypeCase struct {
	name string
	key  func(bg *budget.Budget) string // set to a string
}

func wrongType(t *testing.T, tc wrongTypeCase) {
	t.Helper()
	f, bg, ctx, release := batched(t, 100, budget.Options{})
	raw := f.Server.Client(nil)
	if err := raw.Set(ctx, tc.key(bg), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	bad := reserveAsync(ctx, bg, unknownReq("wt-bad"))
	queuedBehind(t, bg, 1)
	good := reserveAsync(ctx, bg, budget.Request{Order: "wt-good", Lines: line("once", 1, 0), Attributes: customer("c"), Hold: time.Hour})
	queuedBehind(t, bg, 2)
	if o := await(t, release()); o.err != nil {
		t.Fatal(o.err)
	}
	o := await(t, bad)
	if o.err == nil || errors.Is(o.err, budget.ErrUnknown) || !strings.Contains(o.err.Error(), "WRONGTYPE") {
		t.Errorf("wt-bad: %+v, %v: want Redis's WRONGTYPE, not ErrUnknown", o.res, o.err)
	}
	if og := await(t, good); tc.name == "record" && (og.err != nil || !og.res.New) {
		t.Errorf("wt-good, in a batch with wt-bad: %+v, %v: want its own new hold", og.res, og.err)
	}
	if err := raw.Del(ctx, tc.key(bg)).Err(); err != nil {
		t.Fatal(err)
	}
	holds, err := raw.ZRange(ctx, bg.Keys()[2], 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, h := range holds {
		listed[h] = true
	}
	for _, order := range []string{"wt-bad", "wt-good"} {
		info, err := bg.Order(ctx, order)
		if err == nil && info.State == budget.Held && !listed[order] {
			t.Errorf("%s: held (%+v) after an error reply, and not in the holds set: it never ends", order, info)
		}
	}
	if tc.name == "counter" {
		return // the counter was deleted with the string
	}
	onP := len(listed) // wt-good holds "once", not "p"
	if listed["wt-good"] {
		onP--
	}
	left := remaining(t, ctx, bg)
	if used := int64(100) - left; used != int64(onP) {
		t.Errorf("counter holds %d uses, the holds set lists %d (%v)", used, len(listed), holds)
	}
}

// TestFaultUnknownClientKill: CLIENT KILL of every client connection,
// again and again, while 20 goroutines reserve 200 orders against a cap
// of 100 (batched, and alone with MaxBatch 1). Every answer is a hold, a
// *LimitError or ErrUnknown; the Observer counts exactly the holds
// answered as new; the same Reserve again answers the hold of every
// grant (New false), and of an ErrUnknown either its hold or a new
// answer; the counter equals the holds listed, never past the cap.
func TestFaultUnknownClientKill(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxBatch int
	}{{"batched", 0}, {"alone", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			const limit, orders, workers = 100, 200, 20
			f := testredis.StartFaulty(t)
			ctx := testredis.Ctx(t)
			var grants atomic.Int64
			opts := counted(&grants)
			opts.MaxBatch = tc.maxBatch
			bg, _, raw := faultyBudget(t, ctx, f, limit, opts)
			stop := make(chan struct{})
			killed := make(chan int)
			go func() {
				n := 0
				for {
					select {
					case <-stop:
						killed <- n
						return
					default:
					}
					if k, err := raw.ClientKillByFilter(ctx, "TYPE", "normal", "SKIPME", "yes").Result(); err == nil {
						n += int(k)
					}
					time.Sleep(time.Millisecond) // pacing, not synchronisation
				}
			}()
			results := make([]outcomeOf, orders)
			next := make(chan int)
			done := make(chan struct{})
			for range workers {
				go func() {
					defer func() { done <- struct{}{} }()
					for i := range next {
						res, err := bg.Reserve(ctx, unknownReq(fmt.Sprint("ck-", i)))
						results[i] = outcomeOf{res, err}
					}
				}()
			}
			for i := range orders {
				next <- i
			}
			close(next)
			for range workers {
				<-done
			}
			close(stop)
			if n := <-killed; n == 0 {
				t.Fatal("no connection killed: the test tested nothing")
			}
			var news, unknown int64
			for i, o := range results {
				var le *budget.LimitError
				switch {
				case o.err == nil:
					if o.res.New {
						news++
					}
				case errors.As(o.err, &le), errors.Is(o.err, budget.ErrUnknown):
					if errors.Is(o.err, budget.ErrUnknown) {
						unknown++
					}
				default:
					t.Errorf("ck-%d: %v: want a hold, a *LimitError or ErrUnknown", i, o.err)
				}
			}
			if g := grants.Load(); g != news+1 { // and warm
				t.Errorf("%d grants observed, %d answered new (+1 warm)", g, news)
			}
			for i, o := range results {
				if o.err != nil {
					continue
				}
				res, err := bg.Reserve(ctx, unknownReq(fmt.Sprint("ck-", i)))
				if err != nil || res.New {
					t.Errorf("ck-%d again: %+v, %v: want its hold", i, res, err)
				}
			}
			holds, err := raw.ZCard(ctx, bg.Keys()[2]).Result()
			if err != nil {
				t.Fatal(err)
			}
			if used := limit - remaining(t, ctx, bg); used != holds || holds > limit {
				t.Errorf("counter %d, holds %d, cap %d", used, holds, limit)
			}
			t.Logf("%d new, %d unknown, %d holds", news, unknown, holds)
		})
	}
}

// TestFaultUnknownSameOrderCutBatch: two calls of one order in one batch
// whose reply is cut once: after go-redis sends the batch again, the
// first answers its hold as new and the second as not new (two calls one
// after the other); the Observer counts the grant once.
func TestFaultUnknownSameOrderCutBatch(t *testing.T) {
	var grants atomic.Int64
	f, bg, ctx, release := batched(t, 100, counted(&grants))
	a := reserveAsync(ctx, bg, unknownReq("twice"))
	queuedBehind(t, bg, 1)
	b := reserveAsync(ctx, bg, unknownReq("twice"))
	queuedBehind(t, bg, 2)
	f.Proxy.CutNext(1, faultproxy.Contains("twice"))
	if o := await(t, release()); o.err != nil {
		t.Fatal(o.err)
	}
	oa, ob := await(t, a), await(t, b)
	if oa.err != nil || ob.err != nil || !oa.res.New || ob.res.New {
		t.Errorf("first %+v, %v; second %+v, %v: want new, then not new", oa.res, oa.err, ob.res, ob.err)
	}
	if f.Proxy.Cuts() != 1 {
		t.Fatalf("%d cuts, want 1", f.Proxy.Cuts())
	}
	if g := grants.Load(); g != 3 {
		t.Errorf("%d grants observed, want 3 (warm, first, twice)", g)
	}
	if left := remaining(t, ctx, bg); left != 100-3 {
		t.Errorf("remaining %d, want %d", left, 100-3)
	}
}

// TestFaultUnknownReplicasCut: with Options.Replicas (no replica: every
// write is ErrNotReplicated) Reserve is a pipeline of the script and
// WAIT. One cut: go-redis sends both again and the caller gets its hold
// as new, with ErrNotReplicated. Every try cut: ErrUnknown. Either way
// the same Reserve again answers the hold.
func TestFaultUnknownReplicasCut(t *testing.T) {
	for _, tc := range []struct {
		name string
		cuts int
	}{{"one cut", 1}, {"all cut", 4}} {
		t.Run(tc.name, func(t *testing.T) {
			f := testredis.StartFaulty(t)
			ctx := testredis.Ctx(t)
			var grants atomic.Int64
			// Built without Replicas: only Reserve's WAIT is under test
			// (Rebuild's is TestFaultRebuildNotReplicated's).
			b := &testredis.Backend{Client: f.Cut, Prefix: testredis.Prefix(t)}
			newBudget(t, ctx, b, budget.Options{}, capPromo(100, false))
			opts := counted(&grants)
			opts.Replicas, opts.ReplicaTimeout = 1, 10*time.Millisecond
			bg := unbuilt(t, b, opts, capPromo(100, false))
			if _, err := bg.Reserve(ctx, unknownReq("warm")); !errors.Is(err, budget.ErrNotReplicated) {
				t.Fatalf("warm: %v, want ErrNotReplicated", err)
			}
			f.Proxy.CutNext(tc.cuts, faultproxy.Contains("rep-"))
			res, err := bg.Reserve(ctx, unknownReq("rep-0"))
			switch {
			case tc.cuts < 4 && (!errors.Is(err, budget.ErrNotReplicated) || !res.New):
				t.Errorf("%+v, %v: want a new hold and ErrNotReplicated", res, err)
			case tc.cuts == 4 && !errors.Is(err, budget.ErrUnknown):
				t.Errorf("%+v, %v: want ErrUnknown", res, err)
			}
			if f.Proxy.Cuts() != int64(tc.cuts) {
				t.Fatalf("%d cuts, want %d", f.Proxy.Cuts(), tc.cuts)
			}
			res, err = bg.Reserve(ctx, unknownReq("rep-0"))
			if !errors.Is(err, budget.ErrNotReplicated) || res.New || res.State != budget.Held {
				t.Errorf("again: %+v, %v: want the hold, not new", res, err)
			}
			want := int64(2)
			if tc.cuts == 4 {
				want = 1
			}
			if g := grants.Load(); g != want {
				t.Errorf("%d grants observed, want %d", g, want)
			}
			if left := remaining(t, ctx, bg); left != 100-2 {
				t.Errorf("remaining %d, want %d", left, 100-2)
			}
		})
	}
}

// TestFaultWrongTypeLog: the confirmation log, written after the
// record, holds a string. Reserve and Confirm fail with WRONGTYPE and
// write nothing: the order is not left confirmed with no entry for the
// ledger, nor held outside the holds set; once the key is a stream
// again, both work and the log has the entry.
func TestFaultWrongTypeLog(t *testing.T) {
	b := testredis.Redis(t)
	ctx := testredis.Ctx(t)
	bg := newBudget(t, ctx, b, budget.Options{}, capPromo(10, false))
	if _, err := bg.Reserve(ctx, unknownReq("held")); err != nil {
		t.Fatal(err)
	}
	if err := b.Client.Set(ctx, bg.LogKey(), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"confirm", func() error { _, err := bg.Confirm(ctx, "held"); return err }},
		{"reserve", func() error { _, err := bg.Reserve(ctx, unknownReq("new")); return err }},
	} {
		if err := tc.call(); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") || errors.Is(err, budget.ErrUnknown) {
			t.Errorf("%s with the log a string: %v, want WRONGTYPE", tc.name, err)
		}
	}
	if info, err := bg.Order(ctx, "held"); err != nil || info.State != budget.Held {
		t.Errorf("held after the failed confirm: %+v, %v: want still held", info, err)
	}
	if _, err := bg.Order(ctx, "new"); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("new after the failed reserve: %v, want ErrNotFound", err)
	}
	if left := remaining(t, ctx, bg); left != 9 {
		t.Errorf("remaining %d, want 9", left)
	}
	if err := b.Client.Del(ctx, bg.LogKey()).Err(); err != nil {
		t.Fatal(err)
	}
	if c, err := bg.Confirm(ctx, "held"); err != nil || !c.New {
		t.Fatalf("confirm after the log came back: %+v, %v", c, err)
	}
	if n, err := b.Client.XLen(ctx, bg.LogKey()).Result(); err != nil || n != 1 {
		t.Errorf("log: %d entries, %v: want 1", n, err)
	}
}
