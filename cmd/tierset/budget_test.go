package main_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/opsview"
)

// TestBudgetCommands: budget ls lists every cap of every published
// budget with its limit, used, held and remaining; -json gives the same
// numbers; show -order prints an order's holds; a budget that is not
// there is a one-line error (exit 1), flag mistakes exit 2.
func TestBudgetCommands(t *testing.T) {
	eachServer(t, func(t *testing.T, s *server) {
		ctx := context.Background()
		bg, err := budget.New(s.client, "shop", budget.Options{Prefix: s.prefix, Promotions: []budget.Promotion{
			{ID: "summer", MaxPerCart: 2, Caps: []budget.Cap{{Measure: budget.Uses, Limit: 100}, {Measure: budget.Spend, Limit: 5000, Per: "customer"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bg.Rebuild(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if err := bg.Publish(ctx); err != nil {
			t.Fatal(err)
		}
		for i, c := range []string{"c1", "c2"} {
			order := []string{"o1", "o2"}[i]
			if _, err := bg.Reserve(ctx, budget.Request{Order: order, Attributes: map[string]string{"customer": c},
				Lines: []budget.Line{{Promotion: "summer", Uses: 1, Amount: 700}}, Hold: time.Hour}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := bg.Confirm(ctx, "o2"); err != nil {
			t.Fatal(err)
		}
		r := tierset(t, s.args("budget", "ls")...)
		r.expect(t, 0)
		for _, want := range []string{"BUDGET  PROMOTION  CAP", "shop    summer     uses per cart ", "shop    summer     uses  ",
			"  100    2  ", "spend per customer  5000   1400 (2 values, most 700)  700   4300", "1 budget, 1 order held\n"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("ls lacks %q:\n%s", want, r.stdout)
			}
		}
		r = tierset(t, s.args("budget", "ls", "-json")...)
		r.expect(t, 0)
		var vs []opsview.Budget
		if err := json.Unmarshal([]byte(r.stdout), &vs); err != nil {
			t.Fatalf("ls -json: %v\n%s", err, r.stdout)
		}
		if len(vs) != 1 || vs[0].Name != "shop" || vs[0].Holds != 1 || len(vs[0].Promotions) != 1 {
			t.Fatalf("ls -json: %+v", vs)
		}
		p := vs[0].Promotions[0]
		if p.ID != "summer" || p.MaxPerCart != 2 || p.Holds != 1 || len(p.Caps) != 2 ||
			p.Caps[0] != (opsview.BudgetCap{Cap: "uses", Limit: 100, Used: 2, Held: 1, Remaining: 98}) ||
			p.Caps[1] != (opsview.BudgetCap{Cap: "spend per customer", Limit: 5000, Used: 1400, Held: 700, Values: 2, Most: 700, Remaining: 4300}) {
			t.Fatalf("ls -json promotion: %+v", p)
		}
		r = tierset(t, s.args("budget", "show", "-budget", "shop", "-order", "o1")...)
		r.expect(t, 0)
		for _, want := range []string{"order o1 in budget shop: held\n", "confirmed -\n", "attribute customer = c1\n", "summer     1     700"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("show -order lacks %q:\n%s", want, r.stdout)
			}
		}
		r = tierset(t, s.args("budget", "show", "-budget", "shop", "-order", "o2", "-json")...)
		r.expect(t, 0)
		var o opsview.BudgetOrder
		if err := json.Unmarshal([]byte(r.stdout), &o); err != nil || o.State != "confirmed" || o.Confirmed == nil || len(o.Lines) != 1 {
			t.Fatalf("show -order -json: %+v %v\n%s", o, err, r.stdout)
		}
		for _, tc := range []struct {
			args []string
			msg  string
		}{
			{[]string{"budget", "show", "-budget", "nope"}, `no budget "nope" under prefix`},
			{[]string{"budget", "show", "-budget", "shop", "-order", "o9"}, `budget: no reservation for order: order "o9"`},
		} {
			r := tierset(t, s.args(tc.args...)...)
			r.expect(t, 1)
			if !strings.Contains(r.stderr, tc.msg) || strings.Count(strings.TrimPrefix(r.stderr, s.said(t)), "\n") != 1 {
				t.Errorf("%v: stderr %q: want one line with %q", tc.args, r.stderr, tc.msg)
			}
		}
	})
	t.Run("usage", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			msg  string
		}{
			{[]string{"budget"}, "want a subcommand: ls, show"},
			{[]string{"budget", "drop"}, `unknown budget subcommand "drop"`},
			{[]string{"budget", "show", "-redis", "127.0.0.1:1"}, "show needs -budget"},
			{[]string{"budget", "ls", "-budget", "a b", "-redis", "127.0.0.1:1"}, `-budget "a b": invalid budget name`},
			{[]string{"budget", "ls", "-order", "o1", "-redis", "127.0.0.1:1"}, "ls does not take -order"},
			{[]string{"budget", "ls"}, "-redis (or $TIERSET_REDIS_URL) is required"},
			{[]string{"budget", "ls", "-limit", "3"}, "flag provided but not defined: -limit"},
		} {
			r := tierset(t, tc.args...)
			r.expect(t, 2)
			if !strings.Contains(r.stderr, tc.msg) {
				t.Errorf("%v: stderr %q lacks %q", tc.args, r.stderr, tc.msg)
			}
		}
	})
}
