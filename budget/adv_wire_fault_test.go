package budget_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/faultproxy"
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
	outcome := func(o outcomeOf) string {
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
				got = append(got, outcome(await(t, ch)))
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
				got = append(got, outcome(outcomeOf{res, err}))
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
