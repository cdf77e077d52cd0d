package budget_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/testredis"
)

// heldBatch starts a Faulty server with a budget of promos on it, sends
// "warm" (one use of warmPromo) so the script is loaded, runs before
// (alone, not held), then holds the reply of the next call ("first", the
// same as warm): the calls made until release go together in one batch.
func heldBatch(t *testing.T, opts budget.Options, warmPromo string, before func(ctx context.Context, bg *budget.Budget), promos ...budget.Promotion) (*testredis.Faulty, *budget.Budget, context.Context, func() <-chan outcomeOf) {
	t.Helper()
	f := testredis.StartFaulty(t)
	ctx := testredis.Ctx(t)
	bg := newBudget(t, ctx, &testredis.Backend{Client: f.Cut, Prefix: testredis.Prefix(t)}, opts, promos...)
	if _, err := bg.Reserve(ctx, budget.Request{Order: "warm", Attributes: customer("warm"), Lines: line(warmPromo, 1, 0), Hold: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(ctx, bg)
	}
	h := f.Proxy.HoldNext(faultproxy.Contains("EVALSHA"))
	t.Cleanup(h.Release)
	first := reserveAsync(ctx, bg, budget.Request{Order: "first", Attributes: customer("first"), Lines: line(warmPromo, 1, 0), Hold: time.Hour})
	waitHeld(t, h)
	return f, bg, ctx, func() <-chan outcomeOf { h.Release(); return first }
}

// redisPast waits until Redis TIME is past end.
func redisPast(t *testing.T, ctx context.Context, c *redis.Client, end time.Time) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		now, err := c.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if now.After(end) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis TIME %v still before %v after 5s", now, end)
		}
		time.Sleep(10 * time.Millisecond) // a poll of Redis TIME with a deadline
	}
}

// TestBatchAllOrNoneShared: one batch of requests over shared counters
// (uses in all, spend per day, once per customer), each judged all or
// none: a request refused by its last cap, or by its first, counts none
// of its lines, so a later request of the batch gets what it left; two
// holds whose time ends before the batch are given back there and one is
// reserved again as new; the same order twice answers its hold or
// ErrConflict. MaxPerCart refuses before the queue.
func TestBatchAllOrNoneShared(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skipf("no zone database: %v", err)
	}
	promos := []budget.Promotion{
		{ID: "p", MaxPerCart: 5, Caps: []budget.Cap{{Measure: budget.Uses, Limit: 10},
			{Measure: budget.Spend, Limit: 1000, Period: budget.Day, Location: berlin}}},
		{ID: "q", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 1, Per: "customer"}}},
	}
	var oldEnd time.Time
	before := func(ctx context.Context, bg *budget.Budget) {
		res, err := bg.Reserve(ctx, budget.Request{Order: "old", Lines: line("p", 1, 0), Hold: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		res2, err := bg.Reserve(ctx, budget.Request{Order: "old2", Lines: line("p", 2, 0), Hold: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		// Both holds must have ended when the batch runs: old2's, made
		// after old's, may end a few milliseconds later.
		oldEnd = res.Expires
		if res2.Expires.After(oldEnd) {
			oldEnd = res2.Expires
		}
	}
	f, bg, ctx, release := heldBatch(t, budget.Options{}, "p", before, promos...)
	pq := func(uses, amount int64) []budget.Line {
		return []budget.Line{{Promotion: "p", Uses: uses, Amount: amount}, {Promotion: "q", Uses: 1}}
	}
	limit := func(promo string, used int64) func(error) bool {
		return func(err error) bool {
			var le *budget.LimitError
			return errors.As(err, &le) && le.Promotion == promo && le.Used == used
		}
	}
	type call struct {
		r   budget.Request
		new bool             // for a grant
		bad func(error) bool // nil: a grant
	}
	// warm and first hold 2 uses; old and old2 (3) end before the batch.
	calls := []call{
		{r: budget.Request{Order: "a1", Attributes: customer("a"), Lines: pq(4, 100)}, new: true},            // 6 uses, 100 spent
		{r: budget.Request{Order: "a2", Attributes: customer("a"), Lines: pq(3, 100)}, bad: limit("q", 1)},   // refused by its last cap
		{r: budget.Request{Order: "s1", Attributes: customer("s"), Lines: pq(1, 950)}, bad: limit("p", 100)}, // refused by spend, q not counted
		{r: budget.Request{Order: "b1", Attributes: customer("b"), Lines: line("p", 3, 900)}, new: true},     // 9 uses, 1000 spent: fits only if a2 and s1 counted nothing
		{r: budget.Request{Order: "old", Lines: line("p", 1, 0)}, new: true},                                 // its hold ended: a new one, 10 uses
		{r: budget.Request{Order: "old2", Attributes: customer("z"), Lines: line("q", 1, 0)}, new: true},     // ended, other lines: no conflict
		{r: budget.Request{Order: "c1", Lines: line("p", 1, 0)}, bad: limit("p", 10)},
		{r: budget.Request{Order: "b1", Attributes: customer("b"), Lines: line("p", 3, 900)}, new: false}, // the same again
		{r: budget.Request{Order: "b1", Attributes: customer("b"), Lines: line("p", 1, 0)}, bad: func(err error) bool { return errors.Is(err, budget.ErrConflict) }},
		{r: budget.Request{Order: "z2", Attributes: customer("z"), Lines: line("q", 1, 0)}, bad: limit("q", 1)}, // old2 counted it in this batch
	}
	var chs []<-chan outcomeOf
	for i, c := range calls {
		c.r.Hold = time.Hour
		chs = append(chs, reserveAsync(ctx, bg, c.r))
		queuedBehind(t, bg, i+1)
	}
	if _, err := bg.Reserve(ctx, budget.Request{Order: "big", Lines: line("p", 6, 0), Hold: time.Hour}); !errors.Is(err, budget.ErrLimit) {
		t.Errorf("6 uses past MaxPerCart 5: %v, want ErrLimit", err)
	}
	if n := budget.Queued(bg); n != len(calls) {
		t.Errorf("%d queued after a MaxPerCart refusal, want %d", n, len(calls))
	}
	redisPast(t, ctx, f.Server.Client(nil), oldEnd)
	if o := await(t, release()); o.err != nil {
		t.Fatal(o.err)
	}
	for i, ch := range chs {
		o := await(t, ch)
		c := calls[i]
		if c.bad != nil {
			if !c.bad(o.err) {
				t.Errorf("%d %s %v: %+v, %v: want refused", i, c.r.Order, c.r.Lines, o.res, o.err)
			}
		} else if o.err != nil || o.res.New != c.new || o.res.State != budget.Held {
			t.Errorf("%d %s %v: %+v, %v: want held, new %v", i, c.r.Order, c.r.Lines, o.res, o.err, c.new)
		}
	}
	for _, w := range []struct {
		cust  string
		promo string
		left  budget.Left
	}{
		{"a", "q", budget.Left{Uses: 0, Spend: budget.NoCap}},
		{"s", "q", budget.Left{Uses: 1, Spend: budget.NoCap}},
		{"z", "q", budget.Left{Uses: 0, Spend: budget.NoCap}},
		{"b", "q", budget.Left{Uses: 1, Spend: budget.NoCap}},
		{"a", "p", budget.Left{Uses: 0, Spend: 0}},
	} {
		left, err := bg.Remaining(ctx, customer(w.cust), w.promo)
		if err != nil || left[w.promo] != w.left {
			t.Errorf("remaining %s for %s: %+v, %v: want %+v", w.promo, w.cust, left, err, w.left)
		}
	}
}

// TestBatchLuaLimits: the largest requests in the largest batches run:
// 64 requests of 64 lines (each promotion with caps in all, per customer,
// per day and per week in a zone) with orders and attribute values of
// the longest, and MaxBatch 1000 filled; MaxBatch outside 1..1000 is a
// ValidationError naming it.
func TestBatchLuaLimits(t *testing.T) {
	for _, mb := range []int{-1, 1001} {
		_, err := budget.New(testredis.Mini(t).Client, "shop", budget.Options{MaxBatch: mb})
		if !errors.Is(err, &budget.ValidationError{Field: "options"}) || !strings.Contains(err.Error(), "MaxBatch") {
			t.Errorf("MaxBatch %d: %v, want a ValidationError naming MaxBatch", mb, err)
		}
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skipf("no zone database: %v", err)
	}
	long := func(c byte, i int) string {
		return fmt.Sprintf("%03d", i) + strings.Repeat(string(c), budget.MaxValueBytes-3)
	}
	for _, tc := range []struct {
		name     string
		maxBatch int
		n, lines int
	}{
		{"64 requests of 64 lines", 0, 64, budget.MaxLines},
		{"1000 requests", 1000, 1000, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var promos []budget.Promotion
			for i := range budget.MaxLines {
				promos = append(promos, budget.Promotion{ID: fmt.Sprint("p", i), Caps: []budget.Cap{
					{Measure: budget.Uses, Limit: int64(tc.n)},
					{Measure: budget.Uses, Limit: 1, Per: "customer"},
					{Measure: budget.Spend, Limit: 1 << 40, Period: budget.Day, Location: berlin},
					{Measure: budget.Uses, Limit: 1 << 40, Period: budget.Week, Location: berlin},
				}})
			}
			_, bg, ctx, release := heldBatch(t, budget.Options{MaxBatch: tc.maxBatch}, "p0", nil, promos...)
			// warm and first hold 2 of p0's n: the last 2 requests are refused.
			var chs []<-chan outcomeOf
			for i := range tc.n {
				var ls []budget.Line
				for j := range tc.lines {
					ls = append(ls, budget.Line{Promotion: fmt.Sprint("p", j), Uses: 1, Amount: 1 << 30})
				}
				chs = append(chs, reserveAsync(ctx, bg, budget.Request{Order: long('o', i)[:budget.MaxOrderBytes],
					Attributes: map[string]string{"customer": long('c', i), strings.Repeat("k", budget.MaxValueBytes): long('v', i)},
					Lines:      ls, Hold: time.Hour}))
			}
			queuedBehind(t, bg, tc.n)
			if o := await(t, release()); o.err != nil {
				t.Fatal(o.err)
			}
			granted := 0
			for i, ch := range chs {
				o := await(t, ch)
				switch {
				case o.err == nil && o.res.New:
					granted++
				case errors.Is(o.err, budget.ErrLimit):
				default:
					t.Fatalf("request %d: %+v, %v", i, o.res, o.err)
				}
			}
			if granted != tc.n-2 {
				t.Errorf("%d granted, want %d", granted, tc.n-2)
			}
			left, err := bg.Remaining(ctx, customer("x"), "p0")
			if err != nil || left["p0"].Uses != 0 {
				t.Errorf("remaining %+v, %v: want p0 used up", left, err)
			}
		})
	}
}

// TestBatchMixedCapsConcurrent: 400 callers at once over two promotions
// (uses in all and per customer, spend per day, uses per customer per
// week), one or both per request, some orders asked twice, while grants
// are confirmed and released: the holds and redemptions left never pass
// a cap, an order is granted new at most once, and the counters equal
// what the answers say is left.
func TestBatchMixedCapsConcurrent(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skipf("no zone database: %v", err)
	}
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		bg := newBudget(t, ctx, b, budget.Options{},
			budget.Promotion{ID: "p", MaxPerCart: 2, Caps: []budget.Cap{{Measure: budget.Uses, Limit: 60},
				{Measure: budget.Uses, Limit: 2, Per: "customer"}, {Measure: budget.Spend, Limit: 5000, Period: budget.Day, Location: berlin}}},
			budget.Promotion{ID: "q", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 40},
				{Measure: budget.Uses, Limit: 1, Per: "customer", Period: budget.Week, Location: berlin}}})
		const calls, customers = 400, 25
		req := func(i int) budget.Request {
			p := budget.Line{Promotion: "p", Uses: int64(1 + i%2), Amount: 100}
			q := budget.Line{Promotion: "q", Uses: 1}
			ls := [][]budget.Line{{p}, {q}, {p, q}}[i%3]
			return budget.Request{Order: fmt.Sprint("o", i), Attributes: customer(fmt.Sprint("c", i%customers)), Lines: ls, Hold: time.Hour}
		}
		type answer struct {
			i       int
			new, ok bool
			gone    bool // released
		}
		answers := make(chan answer, 2*calls)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for k := range calls + calls/20 {
			i := k
			if k >= calls {
				i = (k - calls) * 20 // the same order again
			}
			wg.Go(func() {
				<-start
				res, err := bg.Reserve(ctx, req(i))
				a := answer{i: i, ok: err == nil, new: res.New}
				switch {
				case err == nil && i%11 == 0 && i%20 != 0: // an order asked once: released, it could be reserved anew
					if _, err := bg.Release(ctx, res.Order); err != nil {
						t.Errorf("release %s: %v", res.Order, err)
					}
					a.gone = true
				case err == nil && i%5 == 0 && i%20 != 0:
					if _, err := bg.Confirm(ctx, res.Order); err != nil {
						t.Errorf("confirm %s: %v", res.Order, err)
					}
				case err != nil && !errors.Is(err, budget.ErrLimit):
					t.Errorf("reserve o%d: %v", i, err)
				}
				answers <- a
			})
		}
		close(start)
		wg.Wait()
		close(answers)
		news := map[int]int{}
		live := map[int]bool{}
		gone := map[int]bool{}
		for a := range answers {
			if a.new {
				news[a.i]++
			}
			if a.ok {
				live[a.i] = true
			}
			if a.gone {
				gone[a.i] = true
			}
		}
		type use struct{ p, q, spend int64 }
		var all use
		per := map[string]*use{}
		for i := range live {
			if news[i] != 1 {
				t.Errorf("o%d granted new %d times", i, news[i])
			}
			if gone[i] {
				continue
			}
			r := req(i)
			c := r.Attributes["customer"]
			if per[c] == nil {
				per[c] = &use{}
			}
			for _, l := range r.Lines {
				if l.Promotion == "p" {
					all.p += l.Uses
					all.spend += l.Amount
					per[c].p += l.Uses
				} else {
					all.q += l.Uses
					per[c].q += l.Uses
				}
			}
		}
		if all.p > 60 || all.q > 40 || all.spend > 5000 {
			t.Errorf("past a cap: %+v", all)
		}
		for c := range customers {
			name := fmt.Sprint("c", c)
			u := per[name]
			if u == nil {
				u = &use{}
			}
			if u.p > 2 || u.q > 1 {
				t.Errorf("customer %s past a cap: %+v", name, *u)
			}
			left, err := bg.Remaining(ctx, customer(name), "p", "q")
			want := map[string]budget.Left{"p": {Uses: min(60-all.p, 2-u.p), Spend: 5000 - all.spend}, "q": {Uses: min(40-all.q, 1-u.q), Spend: budget.NoCap}}
			if err != nil || left["p"] != want["p"] || left["q"] != want["q"] {
				t.Errorf("customer %s: remaining %+v, %v: want %+v", name, left, err, want)
			}
		}
	})
}

// TestFaultBatchConfirmReleaseRace: Confirm and Release of orders whose
// batch ran but whose reply is still on its way: the batch answers its
// grants as they were made, Confirm and Release see them, and the
// counter holds each grant once (a released order asked again is a new
// hold).
func TestFaultBatchConfirmReleaseRace(t *testing.T) {
	f, bg, ctx, release := heldBatch(t, budget.Options{}, "p", nil, capPromo(100, false))
	x := reserveAsync(ctx, bg, budget.Request{Order: "x", Lines: line("p", 1, 0), Hold: time.Hour})
	y := reserveAsync(ctx, bg, budget.Request{Order: "y", Lines: line("p", 1, 0), Hold: time.Hour})
	queuedBehind(t, bg, 2)
	if _, err := bg.Release(ctx, "y"); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("release of y queued: %v, want ErrNotFound", err)
	}
	second := f.Proxy.HoldNext(faultproxy.Contains("EVALSHA"))
	t.Cleanup(second.Release)
	if o := await(t, release()); o.err != nil {
		t.Fatal(o.err)
	}
	waitHeld(t, second)
	if c, err := bg.Confirm(ctx, "x"); err != nil || !c.New {
		t.Errorf("confirm x while its reply is held: %+v, %v", c, err)
	}
	if st, err := bg.Release(ctx, "y"); err != nil || st != budget.Released {
		t.Errorf("release y while its reply is held: %v, %v", st, err)
	}
	second.Release()
	for name, ch := range map[string]<-chan outcomeOf{"x": x, "y": y} {
		if o := await(t, ch); o.err != nil || !o.res.New || o.res.State != budget.Held {
			t.Errorf("%s: %+v, %v: want a new hold", name, o.res, o.err)
		}
	}
	if res, err := bg.Reserve(ctx, budget.Request{Order: "x", Lines: line("p", 1, 0), Hold: time.Hour}); err != nil || res.New || res.State != budget.Confirmed {
		t.Errorf("x again: %+v, %v: want confirmed, not new", res, err)
	}
	if res, err := bg.Reserve(ctx, budget.Request{Order: "y", Lines: line("p", 1, 0), Hold: time.Hour}); err != nil || !res.New {
		t.Errorf("y again after its release: %+v, %v: want a new hold", res, err)
	}
	if left, err := bg.Remaining(ctx, nil, "p"); err != nil || left["p"].Uses != 100-4 {
		t.Errorf("remaining %+v, %v: want %d (warm, first, x, y)", left, err, 100-4)
	}
}
