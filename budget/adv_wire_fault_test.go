package budget_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/testredis"
)

// TestFaultAdvWireCutMixed: one batch of mixed cart shapes (caps strings
// shared by some requests, an empty one, values that need escaping, an
// order twice with its cart and once with another) answers the same when
// its reply is cut once (go-redis sends it again: the records answer
// their own calls new) as uncut; with every try cut each caller gets
// ErrUnknown, and the same calls again answer the holds the first try
// made, with the counters never past a cap.
func TestFaultAdvWireCutMixed(t *testing.T) {
	const tries = 4 // go-redis's default MaxRetries (3), plus the first
	promos := []budget.Promotion{
		{ID: "p", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 6}, {Measure: budget.Uses, Limit: 2, Per: "customer"}}},
		{ID: "q", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 1, Per: "zone"}}},
		{ID: "c"},
	}
	p, q, c := budget.Line{Promotion: "p", Uses: 1}, budget.Line{Promotion: "q", Uses: 1}, budget.Line{Promotion: "c", Uses: 3, Amount: 7}
	at := func(cust, zone string) map[string]string { return map[string]string{"customer": cust, "zone": zone} }
	type call struct {
		r    budget.Request
		want string // new, again, limit, conflict
	}
	// warm and first (customers warm, first) hold 2 uses of p
	calls := []call{
		{budget.Request{Order: "wcut-a", Attributes: at(`A"<`, "Z1"), Lines: []budget.Line{p, q}}, "new"},
		{budget.Request{Order: "wcut-b", Attributes: at(`A"<`, "Z9"), Lines: []budget.Line{p}}, "new"},
		{budget.Request{Order: "wcut-c", Attributes: at(`A"<`, "Z9"), Lines: []budget.Line{p}}, "limit"}, // A's 2 used
		{budget.Request{Order: "wcut-d", Attributes: at("B", "Z1"), Lines: []budget.Line{q}}, "limit"},   // Z1 used by a
		{budget.Request{Order: "wcut-a", Attributes: at(`A"<`, "Z1"), Lines: []budget.Line{q, p}}, "again"},
		{budget.Request{Order: "wcut-a", Attributes: at(`A"<`, "Z1"), Lines: []budget.Line{p}}, "conflict"},
		{budget.Request{Order: "wcut-e", Attributes: at(`B\`, "Z9"), Lines: []budget.Line{c}}, "new"},
		{budget.Request{Order: "wcut-f", Attributes: at("C\u2028", "Z9"), Lines: []budget.Line{{Promotion: "p", Uses: 2}}}, "new"}, // 6 of 6
		{budget.Request{Order: "wcut-g", Attributes: at("D", "Z9"), Lines: []budget.Line{p}}, "limit"},
		{budget.Request{Order: "wcut-h", Attributes: at("E", "Z2"), Lines: []budget.Line{c, q}}, "new"},
	}
	for _, tc := range []struct {
		name string
		cuts int
	}{{"uncut", 0}, {"cut once", 1}, {"every try cut", tries}} {
		t.Run(tc.name, func(t *testing.T) {
			f, bg, ctx, release := heldBatch(t, budget.Options{}, "p", nil, promos...)
			var chs []<-chan outcomeOf
			for i, cl := range calls {
				cl.r.Hold = time.Hour
				chs = append(chs, reserveAsync(ctx, bg, cl.r))
				queuedBehind(t, bg, i+1)
			}
			if tc.cuts > 0 {
				f.Proxy.CutNext(tc.cuts, faultproxy.Contains("wcut-"))
			}
			if o := await(t, release()); o.err != nil {
				t.Fatal(o.err)
			}
			var got []string
			for _, ch := range chs {
				got = append(got, await(t, ch).name())
			}
			var want []string
			for _, cl := range calls {
				w := cl.want
				if tc.cuts == tries {
					w = "unknown"
				}
				want = append(want, w)
			}
			if !slices.Equal(got, want) {
				t.Errorf("outcomes %v, want %v", got, want)
			}
			if f.Proxy.Cuts() != int64(tc.cuts) {
				t.Errorf("%d cuts, want %d", f.Proxy.Cuts(), tc.cuts)
			}
			// the same calls again, one by one
			got = got[:0]
			want = want[:0]
			for _, cl := range calls {
				cl.r.Hold = time.Hour
				res, err := bg.Reserve(ctx, cl.r)
				got = append(got, outcomeOf{res, err}.name())
				w := cl.want
				if w == "new" {
					w = "again"
				}
				want = append(want, w)
			}
			if !slices.Equal(got, want) {
				t.Errorf("again: outcomes %v, want %v", got, want)
			}
			left, err := bg.Remaining(ctx, at("D", "Z2"), "p", "q")
			if err != nil || left["p"].Uses != 0 || left["q"].Uses != 0 {
				t.Errorf("remaining %+v, %v: want p and q used up", left, err)
			}
			info, err := bg.Info(ctx, "p")
			if err != nil || info.Promotions[0].Caps[0].Used != 6 {
				t.Errorf("info %+v, %v: want 6 uses of p", info, err)
			}
		})
	}
}

// TestFaultAdvWireCutsConcurrent: 32 goroutines reserve carts of three
// shapes against small caps through a proxy that cuts a script's reply
// after every few calls (go-redis sends it again; four in a row use its
// retries up). An order whose outcome was unknown is asked again until
// known. No cap is passed, each held order was answered new once (or
// was unknown and then answered), no refused order was answered new,
// and the counters are exactly the records' lines.
func TestFaultAdvWireCutsConcurrent(t *testing.T) {
	f := testredis.StartFaulty(t)
	ctx := testredis.Ctx(t)
	const usesP, perCust, usesQ = 40, 2, 15
	bg := newBudget(t, ctx, &testredis.Backend{Client: f.Cut, Prefix: testredis.Prefix(t)}, budget.Options{},
		budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Uses, Limit: usesP}, {Measure: budget.Uses, Limit: perCust, Per: "customer"}}},
		budget.Promotion{ID: "q", Caps: []budget.Cap{{Measure: budget.Spend, Limit: 1000}, {Measure: budget.Uses, Limit: usesQ, Period: budget.Day, Location: time.UTC}}})
	const workers, each = 32, 10
	cart := func(k int) budget.Request {
		lines := map[int][]budget.Line{0: {{Promotion: "p", Uses: 1}}, 1: {{Promotion: "q", Uses: 1, Amount: 60}},
			2: {{Promotion: "q", Uses: 1, Amount: 30}, {Promotion: "p", Uses: 1}}}[k%3]
		return budget.Request{Order: fmt.Sprintf("cc\"%d", k), Attributes: customer(fmt.Sprintf(`c\%d`, k%37)), Lines: lines, Hold: time.Hour}
	}
	type tally struct{ news, unknowns int }
	var mu sync.Mutex
	tallies := map[int]*tally{}
	var wg sync.WaitGroup
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				k := g*each + i
				if k%7 == 0 {
					f.Proxy.CutNext(1+k%5, faultproxy.Contains("EVALSHA"))
				}
				tl := &tally{}
				for try := 0; ; try++ {
					if try == 20 {
						t.Errorf("order %d: unknown 20 times", k)
						break
					}
					res, err := bg.Reserve(ctx, cart(k))
					if errors.Is(err, budget.ErrUnknown) {
						tl.unknowns++
						continue
					}
					if err != nil && !errors.Is(err, budget.ErrLimit) {
						t.Errorf("order %d: %v", k, err)
					}
					if err == nil && res.New {
						tl.news++
					}
					break
				}
				mu.Lock()
				tallies[k] = tl
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	f.Proxy.CutNext(0, nil)
	uses := map[string]int64{}
	var spend int64
	perC := map[string]int64{}
	for k := range workers * each {
		tl := tallies[k]
		oi, err := bg.Order(ctx, fmt.Sprintf("cc\"%d", k))
		if errors.Is(err, budget.ErrNotFound) {
			if tl.news != 0 {
				t.Errorf("order %d: answered new %d times, no record", k, tl.news)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if tl.news > 1 || (tl.news == 0 && tl.unknowns == 0) {
			t.Errorf("order %d: held, answered new %d times, unknown %d", k, tl.news, tl.unknowns)
		}
		if !sameCart(oi.Attributes, oi.Lines, cart(k)) {
			t.Errorf("order %d holds %v %v", k, oi.Attributes, oi.Lines)
		}
		for _, l := range oi.Lines {
			uses[l.Promotion] += l.Uses
			if l.Promotion == "q" {
				spend += l.Amount
			}
			if l.Promotion == "p" {
				perC[oi.Attributes["customer"]]++
			}
		}
	}
	if uses["p"] > usesP || uses["q"] > usesQ || spend > 1000 {
		t.Errorf("uses %v, spend %d: past a cap", uses, spend)
	}
	for c, n := range perC {
		if n > perCust {
			t.Errorf("customer %q: %d uses of p", c, n)
		}
	}
	checkWholeCounts(ctx, t, bg, uses, spend, false, "p", "q")
	if f.Proxy.Cuts() == 0 {
		t.Error("no reply was cut")
	}
	t.Logf("%d cuts, uses %v, spend %d", f.Proxy.Cuts(), uses, spend)
}
