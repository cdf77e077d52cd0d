package budget_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/testredis"
)

// TestInfo: Info splits each cap's counter into confirmed and held, per
// period where the cap has one and summed over customers (with the count
// and the most one used) where it counts per customer; a hold that ended
// leaves it, and a new day starts at 0. Order reads an order's record.
// Publish and Open give a tool without the definitions the same Info, and
// List finds the budget. Bad input is a *ValidationError naming it.
func TestInfo(t *testing.T) {
	b := testredis.Mini(t)
	ctx := testredis.Ctx(t)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skipf("no zone database: %v", err)
	}
	t0 := time.Date(2026, 3, 4, 12, 0, 0, 0, berlin)
	b.Mini.SetTime(t0)
	caps := []budget.Cap{{Measure: budget.Uses, Limit: 10}, {Measure: budget.Uses, Limit: 3, Per: "customer", Period: budget.Day, Location: berlin},
		{Measure: budget.Spend, Limit: 500}}
	bg := newBudget(t, ctx, b, budget.Options{}, budget.Promotion{ID: "a", MaxPerCart: 4, Caps: caps}, budget.Promotion{ID: "z"})
	if _, err := bg.Reserve(ctx, budget.Request{Order: "o1", Attributes: customer("c1"), Lines: line("a", 2, 100), Hold: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := bg.Reserve(ctx, budget.Request{Order: "o2", Attributes: customer("c2"), Lines: line("a", 1, 50), Hold: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := bg.Confirm(ctx, "o2"); err != nil {
		t.Fatal(err)
	}
	day := func(d int) (time.Time, time.Time) {
		return time.Date(2026, 3, 4+d, 0, 0, 0, 0, berlin), time.Date(2026, 3, 5+d, 0, 0, 0, 0, berlin)
	}
	s0, e0 := day(0)
	s1, e1 := day(1)
	steps := []struct {
		name  string
		at    time.Time
		holds int64
		want  []budget.CapInfo
	}{
		{"held and confirmed", t0, 1, []budget.CapInfo{
			{Cap: caps[0], Used: 3, Held: 2, Remaining: 7},
			{Cap: caps[1], Start: s0, End: e0, Used: 3, Held: 2, Values: 2, Most: 2, Remaining: 1},
			{Cap: caps[2], Used: 150, Held: 100, Remaining: 350}}},
		{"the hold ended", t0.Add(2 * time.Minute), 0, []budget.CapInfo{
			{Cap: caps[0], Used: 1, Remaining: 9},
			{Cap: caps[1], Start: s0, End: e0, Used: 1, Values: 1, Most: 1, Remaining: 2},
			{Cap: caps[2], Used: 50, Remaining: 450}}},
		{"the next day", t0.Add(24 * time.Hour), 0, []budget.CapInfo{
			{Cap: caps[0], Used: 1, Remaining: 9},
			{Cap: caps[1], Start: s1, End: e1, Remaining: 3},
			{Cap: caps[2], Used: 50, Remaining: 450}}},
	}
	for _, st := range steps {
		b.Mini.SetTime(st.at)
		in, err := bg.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if in.Budget != "shop" || !in.At.Equal(st.at) || in.Holds != st.holds || in.Partial || len(in.Promotions) != 2 {
			t.Fatalf("%s: %+v", st.name, in)
		}
		a, z := in.Promotions[0], in.Promotions[1]
		if a.ID != "a" || a.MaxPerCart != 4 || a.Holds != st.holds || z.ID != "z" || len(z.Caps) != 0 {
			t.Fatalf("%s: promotions %+v", st.name, in.Promotions)
		}
		for i, w := range st.want {
			g := a.Caps[i]
			if g.Cap.String() != w.Cap.String() || g.Used != w.Used || g.Held != w.Held || g.Values != w.Values ||
				g.Most != w.Most || g.Remaining != w.Remaining || !g.Start.Equal(w.Start) || !g.End.Equal(w.End) {
				t.Errorf("%s: cap %d (%s):\n got %+v\nwant %+v", st.name, i, w.Cap, g, w)
			}
		}
		if st.name == "held and confirmed" {
			o, err := bg.Order(ctx, "o1")
			if err != nil || o.State != budget.Held || o.Attributes["customer"] != "c1" || !slices.Equal(o.Lines, line("a", 2, 100)) ||
				!o.Reserved.Equal(t0) || !o.Expires.Equal(t0.Add(time.Minute)) || !o.Confirmed.IsZero() {
				t.Fatalf("order o1: %+v %v", o, err)
			}
		}
	}
	// Read after the hold ended and was purged (the Info calls above).
	if o, err := bg.Order(ctx, "o1"); err != nil || o.State != budget.Expired {
		t.Fatalf("order o1 after its hold: %+v %v", o, err)
	}
	if o, err := bg.Order(ctx, "o2"); err != nil || o.State != budget.Confirmed || !o.Confirmed.Equal(t0) {
		t.Fatalf("order o2: %+v %v", o, err)
	}
	if _, err := bg.Order(ctx, "none"); !errors.Is(err, budget.ErrNotFound) {
		t.Fatalf("unknown order: %v", err)
	}

	// A tool without the definitions: Publish, then Open and List.
	if err := bg.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	op, err := budget.Open(ctx, b.Client, "shop", budget.Options{Prefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(op.Promotions(), []string{"a", "z"}) {
		t.Fatalf("opened promotions %v", op.Promotions())
	}
	mine, err1 := bg.Info(ctx, "a")
	theirs, err2 := op.Info(ctx, "a")
	if err1 != nil || err2 != nil || !reflect.DeepEqual(mine.Promotions[0].Caps[0], theirs.Promotions[0].Caps[0]) ||
		len(theirs.Promotions[0].Caps) != 3 || theirs.Promotions[0].Caps[1].Cap.String() != caps[1].String() {
		t.Fatalf("opened info %+v, want %+v (%v %v)", theirs, mine, err1, err2)
	}
	names, err := budget.List(ctx, b.Client, b.Prefix)
	if err != nil || !slices.Equal(names, []string{"shop"}) {
		t.Fatalf("List: %v %v", names, err)
	}
	if empty, err := budget.Open(ctx, b.Client, "other", budget.Options{Prefix: b.Prefix}); err != nil || len(empty.Promotions()) != 0 {
		t.Fatalf("a budget never published: %v %v", empty, err)
	}
	fresh, err := budget.New(b.Client, "fresh", budget.Options{Prefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.Info(ctx); !errors.Is(err, budget.ErrLost) {
		t.Fatalf("a budget never built: %v, want ErrLost", err)
	}

	// Bad input: typed, naming the input, nothing written.
	keys, err := testredis.Keys(ctx, b.Client, b.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		field string
		call  func() error
	}{
		{"promotion", func() error { _, err := bg.Info(ctx, "a", "unknown"); return err }},
		{"order", func() error { _, err := bg.Order(ctx, ""); return err }},
		{"order", func() error { _, err := bg.Order(ctx, "bad\norder"); return err }},
		{"prefix", func() error { _, err := budget.List(ctx, b.Client, "bad prefix*"); return err }},
		{"name", func() error { _, err := budget.Open(ctx, b.Client, "", budget.Options{Prefix: b.Prefix}); return err }},
	} {
		err := c.call()
		if !errors.Is(err, &budget.ValidationError{Field: c.field}) || !errors.Is(err, budget.ErrInvalid) {
			t.Errorf("%s: %v, want a ValidationError naming it", c.field, err)
		}
	}
	after, err := testredis.Keys(ctx, b.Client, b.Prefix)
	slices.Sort(keys)
	slices.Sort(after)
	if err != nil || !slices.Equal(keys, after) {
		t.Fatalf("bad input wrote: %v -> %v (%v)", keys, after, err)
	}
}

// TestInfoServers: Info's script gives the same split on every backend
// (real Redis's Lua included): confirmed and held, summed per customer.
func TestInfoServers(t *testing.T) {
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		caps := []budget.Cap{{Measure: budget.Uses, Limit: 5, Per: "customer"}, {Measure: budget.Spend, Limit: 1000}}
		bg := newBudget(t, ctx, b, budget.Options{}, budget.Promotion{ID: "a", Caps: caps})
		for i, c := range []string{"c1", "c2", "c2"} {
			order := fmt.Sprintf("o%d", i)
			if _, err := bg.Reserve(ctx, budget.Request{Order: order, Attributes: customer(c), Lines: line("a", int64(i+1), 10), Hold: time.Hour}); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				if _, err := bg.Confirm(ctx, order); err != nil {
					t.Fatal(err)
				}
			}
		}
		in, err := bg.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := in.Promotions[0]
		want := []budget.CapInfo{{Cap: caps[0], Used: 6, Held: 5, Values: 2, Most: 5, Remaining: 0}, {Cap: caps[1], Used: 30, Held: 20, Remaining: 970}}
		if in.Holds != 2 || got.Holds != 2 || !reflect.DeepEqual(got.Caps, want) {
			t.Fatalf("info %+v, want caps %+v", in, want)
		}
	})
}
