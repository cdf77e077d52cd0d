package prometheus_test

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/tierset/tierset/budget"
	tsprom "github.com/tierset/tierset/contrib/prometheus"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/testredis"
)

// TestBudgetCollector: after Ensure every series of a budget is scraped
// at 0; a reservation counts one grant per line, a refusal counts under
// its promotion and cap ("per cart" for MaxPerCart), an expired hold once
// however often Expire is called; promotions past MaxPromotions count
// under "other"; and the families pass promlint.
func TestBudgetCollector(t *testing.T) {
	t.Parallel()
	b := testredis.Mini(t)
	ctx := testredis.Ctx(t)
	t0 := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	b.Mini.SetTime(t0)
	q, err := delay.New(b.Client, "orders", delay.Options{Prefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	bc := tsprom.NewBudgetCollector(tsprom.BudgetOptions{MaxPromotions: 2})
	bg, err := budget.New(b.Client, "shop", budget.Options{Prefix: b.Prefix, Expiry: q, Observer: bc.Observer(), Promotions: []budget.Promotion{
		{ID: "a", MaxPerCart: 2, Caps: []budget.Cap{{Measure: budget.Uses, Limit: 1, Per: "customer"}}},
		{ID: "b", Caps: []budget.Cap{{Measure: budget.Spend, Limit: 100}}},
		{ID: "c"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bg.Rebuild(ctx, nil); err != nil {
		t.Fatal(err)
	}
	bc.Ensure(bg)
	reg := pedanticRegistry(bc)
	_, body := scrape(t, reg)
	zero := []string{
		`tierset_budget_grants_total{budget="shop",promotion="a"}`,
		`tierset_budget_grants_total{budget="shop",promotion="b"}`,
		`tierset_budget_grants_total{budget="shop",promotion="other"}`,
		`tierset_budget_refusals_total{budget="shop",cap="uses per customer",promotion="a"}`,
		`tierset_budget_refusals_total{budget="shop",cap="per cart",promotion="a"}`,
		`tierset_budget_refusals_total{budget="shop",cap="spend",promotion="b"}`,
		`tierset_budget_holds_expired_total{budget="shop"}`,
	}
	for _, s := range zero {
		if v := sample(t, body, s); v != 0 {
			t.Errorf("before any event %s = %v", s, v)
		}
	}
	cust := map[string]string{"customer": "c1"}
	if _, err := bg.Reserve(ctx, budget.Request{Order: "o1", Attributes: cust, Hold: time.Minute,
		Lines: []budget.Line{{Promotion: "a", Uses: 1}, {Promotion: "b", Uses: 1, Amount: 100}, {Promotion: "c", Uses: 1}}}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []budget.Request{
		{Order: "o2", Attributes: cust, Lines: []budget.Line{{Promotion: "a", Uses: 1}}, Hold: time.Minute},
		{Order: "o3", Attributes: cust, Lines: []budget.Line{{Promotion: "a", Uses: 3}}, Hold: time.Minute},
		{Order: "o4", Attributes: cust, Lines: []budget.Line{{Promotion: "b", Uses: 1, Amount: 1}}, Hold: time.Minute},
	} {
		if _, err := bg.Reserve(ctx, r); !errors.Is(err, budget.ErrLimit) {
			t.Fatalf("%s: %v, want ErrLimit", r.Order, err)
		}
	}
	b.Mini.SetTime(t0.Add(2 * time.Minute))
	for range 2 {
		if e, err := bg.Expire(ctx, "o1"); err != nil || e.State != budget.Expired {
			t.Fatalf("expire: %+v %v", e, err)
		}
	}
	_, body = scrape(t, reg)
	for i, want := range []float64{1, 1, 1, 1, 1, 1, 1} {
		if v := sample(t, body, zero[i]); v != want {
			t.Errorf("%s = %v, want %v", zero[i], v, want)
		}
	}
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 3 {
		t.Fatalf("gathered %d families, %v", len(mfs), err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}
