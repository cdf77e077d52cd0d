package budget_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/testredis"
)

// TestObserver: a new hold is one grant per line (a repeated Reserve is
// none), a refusal names its promotion and cap (MaxPerCart as "per
// cart"), and an expired hold is reported once, when Expire first takes
// its report.
func TestObserver(t *testing.T) {
	b := testredis.Mini(t)
	ctx := testredis.Ctx(t)
	t0 := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	b.Mini.SetTime(t0)
	q, err := delay.New(b.Client, "orders", delay.Options{Prefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []string
	add := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, fmt.Sprintf(format, args...))
	}
	obs := budget.Observer{
		OnGrant:       func(bg, p string) { add("grant %s %s", bg, p) },
		OnRefusal:     func(bg, p, c string) { add("refuse %s %s %s", bg, p, c) },
		OnHoldExpired: func(bg string) { add("expired %s", bg) },
	}
	bg := newBudget(t, ctx, b, budget.Options{Observer: obs, Expiry: q},
		budget.Promotion{ID: "a", MaxPerCart: 2, Caps: []budget.Cap{{Measure: budget.Uses, Limit: 1, Per: "customer"}}},
		budget.Promotion{ID: "b", Caps: []budget.Cap{{Measure: budget.Spend, Limit: 100}}})
	req := budget.Request{Order: "o1", Attributes: customer("c"), Hold: time.Minute,
		Lines: []budget.Line{{Promotion: "a", Uses: 1}, {Promotion: "b", Uses: 1, Amount: 100}}}
	for range 2 { // the second is a retry: the same reservation, no grant
		if _, err := bg.Reserve(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []budget.Request{
		{Order: "o2", Attributes: customer("c"), Lines: line("a", 1, 0), Hold: time.Minute},
		{Order: "o3", Attributes: customer("d"), Lines: line("b", 1, 1), Hold: time.Minute},
		{Order: "o4", Attributes: customer("d"), Lines: line("a", 3, 0), Hold: time.Minute},
	} {
		if _, err := bg.Reserve(ctx, r); !errors.Is(err, budget.ErrLimit) {
			t.Fatalf("%s: %v, want ErrLimit", r.Order, err)
		}
	}
	b.Mini.SetTime(t0.Add(2 * time.Minute))
	for range 2 { // the report is taken once
		e, err := bg.Expire(ctx, "o1")
		if err != nil || e.State != budget.Expired {
			t.Fatalf("expire: %+v %v", e, err)
		}
	}
	want := []string{"grant shop a", "grant shop b", "refuse shop a uses per customer", "refuse shop b spend",
		"refuse shop a per cart", "expired shop"}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(events, want) {
		t.Fatalf("events\n%q\nwant\n%q", events, want)
	}
}
