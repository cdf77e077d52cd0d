package budget_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/testredis"
)

// TestBatchExactCap: many goroutines reserve at once, batched (default
// and small MaxBatch) and alone (MaxBatch 1): exactly the cap is granted,
// in all and per customer, every refusal is a *LimitError, and the
// counters agree.
func TestBatchExactCap(t *testing.T) {
	for _, tc := range []struct {
		name        string
		maxBatch    int
		perCustomer bool
		limit       int64
		want        int // grants
	}{
		{"default", 0, false, 100, 100},
		{"batches of 7", 7, false, 100, 100},
		{"alone", 1, false, 100, 100},
		{"per customer", 0, true, 3, 3 * 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := testredis.Redis(t)
			ctx := testredis.Ctx(t)
			var grants atomic.Int64
			bg := newBudget(t, ctx, b, budget.Options{MaxBatch: tc.maxBatch,
				Observer: budget.Observer{OnGrant: func(string, string) { grants.Add(1) }}}, capPromo(tc.limit, tc.perCustomer))
			const calls = 400
			var ok, refused atomic.Int64
			var mu sync.Mutex
			var errs []error
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range calls {
				wg.Go(func() {
					<-start
					_, err := bg.Reserve(ctx, budget.Request{Order: fmt.Sprint("o", i), Attributes: customer(fmt.Sprint("c", i%20)),
						Lines: line("p", 1, 0), Hold: time.Hour})
					var le *budget.LimitError
					switch {
					case err == nil:
						ok.Add(1)
					case errors.As(err, &le) && le.Promotion == "p":
						refused.Add(1)
					default:
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				})
			}
			close(start)
			wg.Wait()
			if len(errs) > 0 {
				t.Fatalf("%d calls failed, first: %v", len(errs), errs[0])
			}
			if ok.Load() != int64(tc.want) || refused.Load() != calls-int64(tc.want) || grants.Load() != int64(tc.want) {
				t.Fatalf("granted %d, refused %d, observed %d grants: want %d granted", ok.Load(), refused.Load(), grants.Load(), tc.want)
			}
			s := readState(t, ctx, b.Client, bg)
			if s.total != int64(tc.want) && !tc.perCustomer {
				t.Errorf("counter %d, want %d", s.total, tc.want)
			}
			for c, n := range s.per {
				if n != tc.limit && tc.perCustomer {
					t.Errorf("customer %s: counter %d, want %d", c, n, tc.limit)
				}
			}
		})
	}
}

// queuedBehind waits until n calls wait in bg's queue.
func queuedBehind(t *testing.T, bg *budget.Budget, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for budget.Queued(bg) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls queued after 10s, want %d", budget.Queued(bg), n)
		}
		time.Sleep(time.Millisecond) // a poll with a deadline
	}
}

// waitHeld waits for a held reply.
func waitHeld(t *testing.T, h *faultproxy.Hold) {
	t.Helper()
	select {
	case <-h.Held():
	case <-time.After(10 * time.Second):
		t.Fatal("no script reached the server in 10s")
	}
}

type outcomeOf struct {
	res budget.Reservation
	err error
}

// name names a Reserve's outcome: new, again, limit, conflict, unknown,
// or the error's text.
func (o outcomeOf) name() string {
	switch {
	case o.err == nil && o.res.New:
		return "new"
	case o.err == nil:
		return "again"
	case errors.Is(o.err, budget.ErrLimit):
		return "limit"
	case errors.Is(o.err, budget.ErrConflict):
		return "conflict"
	case errors.Is(o.err, budget.ErrUnknown):
		return "unknown"
	}
	return o.err.Error()
}

// reserveAsync reserves order on its own goroutine; the result comes on
// the channel.
func reserveAsync(ctx context.Context, bg *budget.Budget, r budget.Request) <-chan outcomeOf {
	ch := make(chan outcomeOf, 1)
	go func() {
		res, err := bg.Reserve(ctx, r)
		ch <- outcomeOf{res, err}
	}()
	return ch
}

func await(t *testing.T, ch <-chan outcomeOf) outcomeOf {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(10 * time.Second):
		t.Fatal("no answer in 10s")
	}
	return outcomeOf{}
}

// batched starts a Faulty server with a budget on it (a cap of limit
// uses in all, and 1 per customer on promotion "once") and holds the
// reply of the first batch: calls made until release go together in the
// second.
func batched(t *testing.T, limit int64, opts budget.Options) (*testredis.Faulty, *budget.Budget, context.Context, func() <-chan outcomeOf) {
	t.Helper()
	f := testredis.StartFaulty(t)
	ctx := testredis.Ctx(t)
	bg := newBudget(t, ctx, &testredis.Backend{Client: f.Cut, Prefix: testredis.Prefix(t)}, opts, capPromo(limit, false),
		budget.Promotion{ID: "once", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 1, Per: "customer"}}})
	// The script is loaded first, so every batch is one EVALSHA.
	if _, err := bg.Reserve(ctx, budget.Request{Order: "warm", Lines: line("p", 1, 0), Hold: time.Hour}); err != nil {
		t.Fatal(err)
	}
	h := f.Proxy.HoldNext(faultproxy.Contains("EVALSHA"))
	t.Cleanup(h.Release)
	first := reserveAsync(ctx, bg, budget.Request{Order: "first", Lines: line("p", 1, 0), Hold: time.Hour})
	waitHeld(t, h)
	return f, bg, ctx, func() <-chan outcomeOf { h.Release(); return first }
}

// TestBatchPerRequestErrors: one batch holds a grant, a refusal by a cap,
// a refusal per customer, a conflict and a repeat; each caller gets its
// own answer. A bad request is refused before it is queued.
func TestBatchPerRequestErrors(t *testing.T) {
	_, bg, ctx, release := batched(t, 3, budget.Options{})
	// "warm" and "first" hold 2 of the 3.
	bad := reserveAsync(ctx, bg, budget.Request{Order: "bad", Lines: line("nope", 1, 0), Hold: time.Hour})
	if o := await(t, bad); !errors.Is(o.err, &budget.ValidationError{Field: "promotion"}) {
		t.Fatalf("bad request while a batch is in flight: %v, want a ValidationError for promotion", o.err)
	}
	reqs := []budget.Request{
		{Order: "grant", Attributes: customer("a"), Lines: []budget.Line{{Promotion: "p", Uses: 1}, {Promotion: "once", Uses: 1}}, Hold: time.Hour},
		{Order: "over", Lines: line("p", 1, 0), Hold: time.Hour},
		{Order: "twice", Attributes: customer("a"), Lines: line("once", 1, 0), Hold: time.Hour},
		{Order: "warm", Lines: line("p", 2, 0), Hold: time.Hour},
		{Order: "warm", Lines: line("p", 1, 0), Hold: time.Hour},
	}
	var chs []<-chan outcomeOf
	for i, r := range reqs {
		chs = append(chs, reserveAsync(ctx, bg, r))
		queuedBehind(t, bg, i+1) // in this order
	}
	if o := await(t, release()); o.err != nil || !o.res.New {
		t.Fatalf("first: %+v, %v", o.res, o.err)
	}
	checks := []func(o outcomeOf) bool{
		func(o outcomeOf) bool { return o.err == nil && o.res.New && o.res.State == budget.Held },
		func(o outcomeOf) bool {
			var le *budget.LimitError
			return errors.As(o.err, &le) && le.Promotion == "p" && le.Used == 3 && le.Asked == 1
		},
		func(o outcomeOf) bool {
			var le *budget.LimitError
			return errors.As(o.err, &le) && le.Promotion == "once" && le.Cap.Per == "customer" && le.Used == 1
		},
		func(o outcomeOf) bool { return errors.Is(o.err, budget.ErrConflict) },
		func(o outcomeOf) bool { return o.err == nil && !o.res.New && o.res.State == budget.Held },
	}
	for i, ch := range chs {
		if o := await(t, ch); !checks[i](o) {
			t.Errorf("%s (%v): %+v, %v", reqs[i].Order, reqs[i].Lines, o.res, o.err)
		}
	}
}

// TestBatchCancelOneWaiter: a caller whose ctx ends while queued gets
// ctx's error and nothing is sent for it; one whose ctx ends while its
// batch is in flight gets ErrUnknown, the others of its batch their
// grants, and its own grant is settled all the same (Observer, and a
// retry answers it).
func TestBatchCancelOneWaiter(t *testing.T) {
	var grants atomic.Int64
	seen := make(chan struct{}, 100)
	f, bg, ctx, release := batched(t, 100, budget.Options{Observer: budget.Observer{OnGrant: func(string, string) {
		grants.Add(1)
		seen <- struct{}{}
	}}})
	gone, cancelGone := context.WithCancel(ctx)
	queuedGone := reserveAsync(gone, bg, budget.Request{Order: "queued-gone", Lines: line("p", 1, 0), Hold: time.Hour})
	queuedBehind(t, bg, 1)
	cancelGone()
	if o := await(t, queuedGone); !errors.Is(o.err, context.Canceled) || errors.Is(o.err, budget.ErrUnknown) {
		t.Fatalf("cancelled while queued: %v, want context.Canceled alone", o.err)
	}
	queuedBehind(t, bg, 0)

	flying, cancelFlying := context.WithCancel(ctx)
	inFlight := reserveAsync(flying, bg, budget.Request{Order: "in-flight", Lines: line("p", 1, 0), Hold: time.Hour})
	queuedBehind(t, bg, 1)
	other := reserveAsync(ctx, bg, budget.Request{Order: "other", Lines: line("p", 1, 0), Hold: time.Hour})
	queuedBehind(t, bg, 2)
	second := f.Proxy.HoldNext(faultproxy.Contains("EVALSHA"))
	t.Cleanup(second.Release)
	if o := await(t, release()); o.err != nil {
		t.Fatal(o.err)
	}
	waitHeld(t, second) // the batch of in-flight and other ran; its reply is held
	cancelFlying()
	if o := await(t, inFlight); !errors.Is(o.err, budget.ErrUnknown) || !errors.Is(o.err, context.Canceled) {
		t.Fatalf("cancelled in flight: %v, want ErrUnknown and context.Canceled", o.err)
	}
	second.Release()
	if o := await(t, other); o.err != nil || !o.res.New {
		t.Fatalf("other in the batch: %+v, %v", o.res, o.err)
	}
	// warm, first, other and in-flight: four grants observed.
	for range 4 {
		select {
		case <-seen:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d grants observed in 10s, want 4", grants.Load())
		}
	}
	if o, err := bg.Reserve(ctx, budget.Request{Order: "in-flight", Lines: line("p", 1, 0), Hold: time.Hour}); err != nil || o.New {
		t.Errorf("in-flight again: %+v, %v: want its reservation, not new", o, err)
	}
	if _, err := bg.Order(ctx, "queued-gone"); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("queued-gone: %v, want ErrNotFound (never sent)", err)
	}
	left, err := bg.Remaining(ctx, nil, "p")
	if err != nil || left["p"].Uses != 100-4 {
		t.Errorf("remaining %+v, %v: want %d", left, err, 100-4)
	}
	if n := grants.Load(); n != 4 {
		t.Errorf("%d grants observed, want 4", n)
	}
}

// TestFaultBatchCutReply: the reply of a batch of many requests is cut;
// go-redis sends the batch again, and each request's call token makes it
// answer the grants it made: every caller gets its hold as new, the
// Observer counts each once and the counter holds each once.
func TestFaultBatchCutReply(t *testing.T) {
	var grants atomic.Int64
	f, bg, ctx, release := batched(t, 100, budget.Options{Observer: budget.Observer{OnGrant: func(string, string) { grants.Add(1) }}})
	const n = 20
	var chs []<-chan outcomeOf
	for i := range n {
		chs = append(chs, reserveAsync(ctx, bg, budget.Request{Order: fmt.Sprint("cut", i), Lines: line("p", 1, 0), Hold: time.Hour}))
	}
	queuedBehind(t, bg, n)
	f.Proxy.CutNext(1, faultproxy.Contains("EVALSHA"))
	if o := await(t, release()); o.err != nil {
		t.Fatal(o.err)
	}
	for i, ch := range chs {
		if o := await(t, ch); o.err != nil || !o.res.New {
			t.Errorf("cut%d: %+v, %v: want a new hold", i, o.res, o.err)
		}
	}
	if f.Proxy.Cuts() != 1 {
		t.Fatalf("%d cuts, want 1", f.Proxy.Cuts())
	}
	left, err := bg.Remaining(ctx, nil, "p")
	if err != nil || left["p"].Uses != 100-2-n {
		t.Errorf("remaining %+v, %v: want %d", left, err, 100-2-n)
	}
	if g := grants.Load(); g != 2+n {
		t.Errorf("%d grants observed, want %d", g, 2+n)
	}
}

// TestFaultRetriesUsedUp: every try go-redis makes of a script is cut
// (the script runs; no reply comes), so its retries are used up. The
// outcome is unknown, and each caller, sent alone or in a batch, gets
// ErrUnknown wrapping the transport error; the same Reserve again
// answers the hold the first try made (New false).
func TestFaultRetriesUsedUp(t *testing.T) {
	const tries = 4 // go-redis's default MaxRetries (3), plus the first
	for _, tc := range []struct {
		name string
		n    int // callers
	}{
		{"alone", 1},
		{"batch", 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, bg, ctx, release := batched(t, 100, budget.Options{})
			req := func(i int) budget.Request {
				return budget.Request{Order: fmt.Sprintf("used-up-%s-%d", tc.name, i), Lines: line("p", 1, 0), Hold: time.Hour}
			}
			var chs []<-chan outcomeOf
			if tc.n > 1 { // queued behind "first": one batch of n
				for i := range tc.n {
					chs = append(chs, reserveAsync(ctx, bg, req(i)))
				}
				queuedBehind(t, bg, tc.n)
			}
			// Only the scripts naming these orders are cut, not "first"'s.
			f.Proxy.CutNext(tries, faultproxy.Contains("used-up-"))
			if o := await(t, release()); o.err != nil {
				t.Fatal(o.err)
			}
			if tc.n == 1 { // nothing in flight now: this call goes alone
				chs = append(chs, reserveAsync(ctx, bg, req(0)))
			}
			for i, ch := range chs {
				o := await(t, ch)
				if !errors.Is(o.err, budget.ErrUnknown) || errors.Is(o.err, context.Canceled) {
					t.Errorf("caller %d: %+v, %v: want ErrUnknown", i, o.res, o.err)
				}
			}
			if f.Proxy.Cuts() != tries || f.Proxy.Armed() != 0 {
				t.Fatalf("%d cuts, %d still armed: want %d and 0", f.Proxy.Cuts(), f.Proxy.Armed(), tries)
			}
			for i := range tc.n {
				res, err := bg.Reserve(ctx, req(i))
				if err != nil || res.New || res.State != budget.Held {
					t.Errorf("again %d: %+v, %v: want the hold the first try made", i, res, err)
				}
			}
			left, err := bg.Remaining(ctx, nil, "p")
			if want := int64(100 - 2 - tc.n); err != nil || left["p"].Uses != want {
				t.Errorf("remaining %+v, %v: want %d", left, err, want)
			}
		})
	}
}
