package budget_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
)

// TestAdvWireExtremes: one batch of requests at the ends of the inputs:
// a spend cap of 2^53 filled by one line and refused by one minor unit
// more, caps of limit 0, uses of 2^53, a promotion of twelve caps two of
// which count in one counter (the lower limit holds). Each is judged as
// it would be alone, and releasing every grant gives back exactly what
// it took.
func TestAdvWireExtremes(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skipf("no zone database: %v", err)
	}
	var many []budget.Cap
	for _, per := range []string{"", "customer"} {
		for _, m := range []budget.Measure{budget.Uses, budget.Spend} {
			for _, pd := range []budget.Period{budget.Ever, budget.Day, budget.Week} {
				c := budget.Cap{Measure: m, Limit: budget.MaxAmount, Per: per, Period: pd}
				if pd != budget.Ever {
					c.Location = berlin
				}
				many = append(many, c)
			}
		}
	}
	many[0].Limit = 10
	many = append(many, budget.Cap{Measure: budget.Uses, Limit: 3}) // the same counter as many[0]
	promos := []budget.Promotion{
		{ID: "w", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 1000}}}, // warm and first
		{ID: "max", Caps: []budget.Cap{{Measure: budget.Spend, Limit: budget.MaxAmount}, {Measure: budget.Uses, Limit: budget.MaxAmount}}},
		{ID: "zero", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 0}}},
		{ID: "zerospend", Caps: []budget.Cap{{Measure: budget.Spend, Limit: 0}}},
		{ID: "many", Caps: many},
	}
	type call struct {
		r     budget.Request
		limit *budget.LimitError // nil: granted new
	}
	req := func(order string, l ...budget.Line) budget.Request {
		return budget.Request{Order: order, Attributes: customer("c\u2029" + order), Lines: l, Hold: time.Hour}
	}
	calls := []call{
		{req("max-1", budget.Line{Promotion: "max", Uses: 1, Amount: budget.MaxAmount}), nil},
		{req("max-2", budget.Line{Promotion: "max", Uses: 1, Amount: 1}),
			&budget.LimitError{Promotion: "max", Cap: promos[1].Caps[0], Used: budget.MaxAmount, Asked: 1}},
		{req("max-3", budget.Line{Promotion: "max", Uses: budget.MaxAmount - 1}), nil},
		{req("max-4", budget.Line{Promotion: "max", Uses: 1}),
			&budget.LimitError{Promotion: "max", Cap: promos[1].Caps[1], Used: budget.MaxAmount, Asked: 1}},
		{req("zero-1", budget.Line{Promotion: "zero", Uses: 1}),
			&budget.LimitError{Promotion: "zero", Cap: promos[2].Caps[0], Used: 0, Asked: 1}},
		{req("zerospend-1", budget.Line{Promotion: "zerospend", Uses: budget.MaxAmount}), nil},
		{req("zerospend-2", budget.Line{Promotion: "zerospend", Uses: 1, Amount: 1}),
			&budget.LimitError{Promotion: "zerospend", Cap: promos[3].Caps[0], Used: 0, Asked: 1}},
	}
	for i := range 4 {
		c := call{r: req(fmt.Sprint("many-", i), budget.Line{Promotion: "many", Uses: 1, Amount: budget.MaxAmount / 4})}
		if i == 3 {
			c.limit = &budget.LimitError{Promotion: "many", Cap: many[len(many)-1], Used: 3, Asked: 1}
		}
		calls = append(calls, c)
	}
	_, bg, ctx, release := heldBatch(t, budget.Options{}, "w", nil, promos...)
	var chs []<-chan outcomeOf
	for i, c := range calls {
		chs = append(chs, reserveAsync(ctx, bg, c.r))
		queuedBehind(t, bg, i+1)
	}
	if o := await(t, release()); o.err != nil {
		t.Fatal(o.err)
	}
	var granted []string
	for i, ch := range chs {
		o, c := await(t, ch), calls[i]
		if c.limit == nil {
			if o.err != nil || !o.res.New {
				t.Errorf("%s: %+v, %v: want a new hold", c.r.Order, o.res, o.err)
			}
			granted = append(granted, c.r.Order)
			continue
		}
		var le *budget.LimitError
		if !errors.As(o.err, &le) || le.Promotion != c.limit.Promotion || le.Cap.String() != c.limit.Cap.String() ||
			le.Cap.Limit != c.limit.Cap.Limit || le.Used != c.limit.Used || le.Asked != c.limit.Asked {
			t.Errorf("%s: %v (%+v), want %+v", c.r.Order, o.err, le, c.limit)
		}
	}
	for _, o := range granted {
		if st, err := bg.Release(ctx, o); err != nil || st != budget.Released {
			t.Errorf("release %s: %v, %v", o, st, err)
		}
	}
	info, err := bg.Info(ctx, "max", "zero", "zerospend", "many")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range info.Promotions {
		for _, c := range p.Caps {
			if c.Used != 0 || c.Held != 0 || c.Most != 0 {
				t.Errorf("%s %s after releasing all: %+v", p.ID, c.Cap, c)
			}
		}
	}
}
