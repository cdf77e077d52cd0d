package budget_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/testredis"
)

// TestCaps fills each kind of cap to its limit: the last reservation that
// fits is granted, the next is refused with a LimitError naming the cap,
// and a release makes room again.
func TestCaps(t *testing.T) {
	type try struct {
		cust         string
		uses, amount int64
		ok           bool
	}
	cases := []struct {
		name  string
		promo budget.Promotion
		tries []try
	}{
		{"uses", budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 3}}},
			[]try{{"a", 2, 0, true}, {"b", 1, 0, true}, {"c", 1, 0, false}}},
		{"spend", budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Spend, Limit: 1000}}},
			[]try{{"a", 1, 999, true}, {"b", 1, 2, false}, {"c", 1, 1, true}, {"d", 1, 0, true}, {"e", 1, 1, false}}},
		{"spend near 2^53", budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Spend, Limit: budget.MaxAmount}}},
			[]try{{"a", 1, budget.MaxAmount - 1, true}, {"b", 1, 2, false}, {"c", 1, 1, true}, {"d", 1, 1, false}}},
		{"per customer", budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 2, Per: "customer"}}},
			[]try{{"a", 1, 0, true}, {"a", 1, 0, true}, {"a", 1, 0, false}, {"b", 2, 0, true}, {"b", 1, 0, false}}},
		{"per cart", budget.Promotion{ID: "p", MaxPerCart: 2},
			[]try{{"a", 2, 0, true}, {"a", 3, 0, false}, {"a", 2, 0, true}}},
		{"limit 0", budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 0}}},
			[]try{{"a", 1, 0, false}}},
	}
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				tb := *b
				tb.Prefix = testredis.Prefix(t)
				bg := newBudget(t, ctx, &tb, budget.Options{}, tc.promo)
				var last string
				for i, tr := range tc.tries {
					order := fmt.Sprint("o", i)
					res, err := bg.Reserve(ctx, budget.Request{Order: order, Attributes: customer(tr.cust), Lines: line("p", tr.uses, tr.amount), Hold: time.Minute})
					if tr.ok {
						if err != nil || res.State != budget.Held || !res.New {
							t.Fatalf("try %d: %+v, %v", i, res, err)
						}
						last = order
						continue
					}
					var le *budget.LimitError
					if !errors.As(err, &le) || !errors.Is(err, budget.ErrLimit) || le.Promotion != "p" {
						t.Fatalf("try %d: want a LimitError, got %v", i, err)
					}
				}
				if last == "" {
					return
				}
				// Giving the last grant back makes room for it again.
				if st, err := bg.Release(ctx, last); err != nil || st != budget.Released {
					t.Fatalf("release: %v %v", st, err)
				}
				i := len(tc.tries) - 1
				for tc.tries[i].ok == false {
					i--
				}
				tr := tc.tries[i]
				if _, err := bg.Reserve(ctx, budget.Request{Order: "again", Attributes: customer(tr.cust), Lines: line("p", tr.uses, tr.amount), Hold: time.Minute}); err != nil {
					t.Fatalf("after release: %v", err)
				}
			})
		}
	})
}

// TestAllOrNone: a cart over two promotions whose second is full reserves
// nothing on the first.
func TestAllOrNone(t *testing.T) {
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		bg := newBudget(t, ctx, b, budget.Options{},
			budget.Promotion{ID: "a", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 10}}},
			budget.Promotion{ID: "b", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 1}}})
		if _, err := bg.Reserve(ctx, budget.Request{Order: "o1", Lines: line("b", 1, 0), Hold: time.Minute}); err != nil {
			t.Fatal(err)
		}
		cart := []budget.Line{{Promotion: "a", Uses: 3}, {Promotion: "b", Uses: 1}}
		_, err := bg.Reserve(ctx, budget.Request{Order: "o2", Lines: cart, Hold: time.Minute})
		var le *budget.LimitError
		if !errors.As(err, &le) || le.Promotion != "b" || le.Used != 1 {
			t.Fatalf("want b's cap, got %v", err)
		}
		left, err := bg.Remaining(ctx, nil, "a", "b")
		if err != nil {
			t.Fatal(err)
		}
		if left["a"].Uses != 10 || left["b"].Uses != 0 || left["a"].Spend != budget.NoCap {
			t.Fatalf("remaining %+v", left)
		}
	})
}

// TestIdempotent: Reserve, Confirm and Release answer the same when sent
// again, and refuse what their state forbids.
func TestIdempotent(t *testing.T) {
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		bg := newBudget(t, ctx, b, budget.Options{},
			budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 5}, {Measure: budget.Uses, Limit: 1, Per: "customer"}}})
		req := budget.Request{Order: "o1", Attributes: customer("c"), Lines: line("p", 1, 0), Hold: time.Minute}
		first, err := bg.Reserve(ctx, req)
		if err != nil || !first.New {
			t.Fatal(first, err)
		}
		again, err := bg.Reserve(ctx, req)
		if err != nil || again.New || !again.Expires.Equal(first.Expires) || again.State != budget.Held {
			t.Fatalf("again: %+v %v", again, err)
		}
		other := req
		other.Lines = line("p", 2, 0)
		if _, err := bg.Reserve(ctx, other); !errors.Is(err, budget.ErrConflict) {
			t.Fatalf("other args: %v", err)
		}
		c, err := bg.Confirm(ctx, "o1")
		if err != nil || !c.New || c.Lines[0].Promotion != "p" || c.Attributes["customer"] != "c" {
			t.Fatalf("confirm: %+v %v", c, err)
		}
		if c2, err := bg.Confirm(ctx, "o1"); err != nil || c2.New || !c2.At.Equal(c.At) {
			t.Fatalf("confirm again: %+v %v", c2, err)
		}
		if res, err := bg.Reserve(ctx, req); err != nil || res.State != budget.Confirmed || res.New {
			t.Fatalf("reserve a confirmed order: %+v %v", res, err)
		}
		if _, err := bg.Release(ctx, "o1"); !errors.Is(err, budget.ErrConfirmed) {
			t.Fatalf("release confirmed: %v", err)
		}
		req2 := budget.Request{Order: "o2", Attributes: customer("d"), Lines: line("p", 1, 0), Hold: time.Minute}
		if _, err := bg.Reserve(ctx, req2); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if st, err := bg.Release(ctx, "o2"); err != nil || st != budget.Released {
				t.Fatalf("release: %v %v", st, err)
			}
		}
		if _, err := bg.Confirm(ctx, "o2"); !errors.Is(err, budget.ErrReleased) {
			t.Fatalf("confirm released: %v", err)
		}
		if _, err := bg.Confirm(ctx, "nope"); !errors.Is(err, budget.ErrNotFound) {
			t.Fatalf("confirm unknown: %v", err)
		}
		if _, err := bg.Release(ctx, "nope"); !errors.Is(err, budget.ErrNotFound) {
			t.Fatalf("release unknown: %v", err)
		}
		left, err := bg.Remaining(ctx, customer("c"), "p")
		if err != nil || left["p"].Uses != 0 {
			t.Fatalf("c's remaining %+v %v", left, err)
		}
		left, err = bg.Remaining(ctx, customer("d"), "p")
		if err != nil || left["p"].Uses != 1 {
			t.Fatalf("d's remaining %+v %v", left, err)
		}
	})
}
