package budget_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/keyname"
	"github.com/tierset/tierset/internal/testredis"
)

// oneargPerName and oneargLongName are Cap.Per names that need JSON
// escaping or are as long as a request's attribute name may be.
const oneargPerName = "名前<&>\"'\u2028"

var oneargLongName = strings.Repeat("n", keyname.MaxBytes) // a Per name is a key name

// oneargPromos are wirePromos and a promotion counted per the awkward
// names above.
func oneargPromos() []budget.Promotion {
	return append(wirePromos(), budget.Promotion{ID: "per-ü", Caps: []budget.Cap{
		{Measure: budget.Uses, Limit: 1000, Per: oneargPerName},
		{Measure: budget.Spend, Limit: budget.MaxAmount, Per: oneargLongName}}})
}

// oneargCases are wireCases' accepted requests and carts counted per
// the awkward Per names (values that need escaping, the longest).
func oneargCases() []wireCase {
	var out []wireCase
	for _, c := range wireCases() {
		if c.field == "" {
			out = append(out, c)
		}
	}
	long := strings.Repeat("é", budget.MaxValueBytes/2)
	per := budget.Line{Promotion: "per-ü", Uses: 3, Amount: 7}
	for _, a := range []map[string]string{
		{oneargPerName: "v\u2028<&>\"\\", oneargLongName: long, "customer": "c"},
		{oneargPerName: long, oneargLongName: "=@:{}", "zone": "z"},
	} {
		out = append(out, wireCase{name: "per " + a[oneargPerName][:1], r: budget.Request{Order: "o-per-" + a[oneargLongName][:2],
			Attributes: a, Lines: []budget.Line{per}, Hold: time.Hour}})
	}
	return out
}

// TestAdvOneArgConfirmExpired: every awkward accepted cart, reserved in
// one batch, expires and is confirmed again by Confirm (reserve.lua mode
// 'c', its recorded request sent again as one argument): each is
// confirmed new with its cart, once when two Confirms race, and the
// counters are exactly the carts' uses and spend. Orders no Request may
// carry are refused by Confirm as a ValidationError naming the order.
func TestAdvOneArgConfirmExpired(t *testing.T) {
	f, bg, ctx, release := heldBatch(t, budget.Options{MaxBatch: 1000}, "p", nil, oneargPromos()...)
	admin := f.Server.Client(nil)
	cases := oneargCases()
	var chs []<-chan outcomeOf
	for i, c := range cases {
		c.r.Hold = 500 * time.Millisecond
		chs = append(chs, reserveAsync(ctx, bg, c.r))
		queuedBehind(t, bg, i+1)
	}
	if o := await(t, release()); o.err != nil {
		t.Fatal(o.err)
	}
	var last time.Time
	for i, ch := range chs {
		o := await(t, ch)
		if o.err != nil || !o.res.New {
			t.Fatalf("%s: %+v, %v: want a new hold", cases[i].name, o.res, o.err)
		}
		if o.res.Expires.After(last) {
			last = o.res.Expires
		}
	}
	redisPast(t, ctx, admin, last)
	for _, c := range cases {
		var wg sync.WaitGroup
		confs := make([]budget.Confirmation, 2)
		errs := make([]error, 2)
		for k := range 2 {
			wg.Go(func() { confs[k], errs[k] = bg.Confirm(ctx, c.r.Order) })
		}
		wg.Wait()
		news := 0
		for k := range 2 {
			if errs[k] != nil || !sameCart(confs[k].Attributes, confs[k].Lines, c.r) {
				t.Errorf("%s: Confirm of the expired hold: %+v, %v: want its cart", c.name, confs[k], errs[k])
			}
			if confs[k].New {
				news++
			}
		}
		if news != 1 {
			t.Errorf("%s: %d Confirms answered new, want 1", c.name, news)
		}
		if oi, err := bg.Order(ctx, c.r.Order); err != nil || oi.State != budget.Confirmed || !sameCart(oi.Attributes, oi.Lines, c.r) {
			t.Errorf("%s: Order %+v, %v: want confirmed with its cart", c.name, oi, err)
		}
	}
	// What the carts count: uses and spend of each promotion.
	uses, spend := map[string]int64{"p": 2}, map[string]int64{} // warm and first hold p
	for _, c := range cases {
		for _, l := range c.r.Lines {
			uses[l.Promotion] += l.Uses
			spend[l.Promotion] += l.Amount
		}
	}
	info, err := bg.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range info.Promotions {
		for _, ci := range p.Caps {
			want := uses[p.ID]
			if ci.Cap.Measure == budget.Spend {
				want = spend[p.ID]
			}
			// a cap per attribute: Used sums its values
			if ci.Used != want {
				t.Errorf("%s cap %v: used %d, want %d", p.ID, ci.Cap, ci.Used, want)
			}
		}
	}
	for _, tc := range []struct{ name, order string }{
		{"tab", "o\tx"}, {"newline", "o\nx"}, {"NUL", "o\x00"}, {"NEL", "o\u0085"}, {"invalid UTF-8", "o\xff"},
		{"empty", ""}, {"too long", strings.Repeat("o", budget.MaxOrderBytes+1)},
	} {
		if _, err := bg.Confirm(ctx, tc.order); !errors.Is(err, &budget.ValidationError{Field: "order"}) {
			t.Errorf("Confirm of an order with %s: %v, want a ValidationError naming the order", tc.name, err)
		}
	}
}

// TestAdvOneArgLargestCarts: a batch of carts at every maximum at once:
// MaxLines lines, promotion IDs of the longest key name that need JSON
// escaping, each counted in all, per day and per customer (three caps,
// three candidates each: the longest caps string), order and attribute
// value at their longest. Each is one argument of a few tens of KB; all
// are granted and every counter is exactly the carts'.
func TestAdvOneArgLargestCarts(t *testing.T) {
	const carts = 32
	var promos []budget.Promotion
	var lines []budget.Line
	for i := range budget.MaxLines {
		id := fmt.Sprintf("%03d", i) + strings.Repeat("é<", (keyname.MaxBytes-3)/3)
		promos = append(promos, budget.Promotion{ID: id, Caps: []budget.Cap{
			{Measure: budget.Uses, Limit: budget.MaxAmount},
			{Measure: budget.Spend, Limit: budget.MaxAmount, Period: budget.Day, Location: time.UTC},
			{Measure: budget.Uses, Limit: budget.MaxAmount, Per: "customer"}}})
		lines = append(lines, budget.Line{Promotion: id, Uses: budget.MaxAmount / (2 * carts), Amount: int64(i + 1)})
	}
	f, bg, ctx, release := heldBatch(t, budget.Options{}, promos[0].ID, nil, promos...)
	long := strings.Repeat("ü", budget.MaxValueBytes/2)
	var chs []<-chan outcomeOf
	for i := range carts {
		order := fmt.Sprintf("%03d", i) + strings.Repeat("订", (budget.MaxOrderBytes-3)/3)
		chs = append(chs, reserveAsync(ctx, bg, budget.Request{Order: order,
			Attributes: map[string]string{"customer": long[:len(long)-2*(i%3)]}, Lines: lines, Hold: time.Hour}))
		queuedBehind(t, bg, i+1)
	}
	if o := await(t, release()); o.err != nil {
		t.Fatal(o.err)
	}
	for i, ch := range chs {
		if o := await(t, ch); o.err != nil || !o.res.New {
			t.Errorf("cart %d: %+v, %v: want a new hold", i, o.res, o.err)
		}
	}
	info, err := bg.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range info.Promotions {
		for _, ci := range p.Caps {
			want := carts * (budget.MaxAmount / (2 * carts))
			if ci.Cap.Measure == budget.Spend {
				want = carts * int64(i+1)
			}
			if p.ID == promos[0].ID && ci.Cap.Measure == budget.Uses {
				want += 2 // warm and first
			}
			if ci.Used != want {
				t.Errorf("%s cap %v: used %d, want %d", p.ID, ci.Cap, ci.Used, want)
			}
		}
	}
	if n, err := testredis.CountKeys(ctx, f.Server.Client(nil), bg.Keys()[0]+"o:"); err != nil || n != carts+2 {
		t.Errorf("%d records, %v: want %d", n, err, carts+2)
	}
}
