package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/testredis"
)

// TestPriceWithBudget: with a budget, a line whose promotion the
// customer can still be given says so with what is left; one the
// customer used up, or whose spend left is under the line's discount, is
// priced without its discount and says available false, per customer; a
// promotion the budget does not cap has no budget member; a capped cart
// without a customer is a 400 naming customer. Every answer matches the
// OpenAPI document, and a priced cart is two round trips (the match, then
// the offers).
func TestPriceWithBudget(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(openapiDoc, &doc); err != nil {
		t.Fatal(err)
	}
	c, _, rc := warmedCache(t)
	ctx := t.Context()
	bg, err := budget.New(rc, "shop", budget.Options{Promotions: []budget.Promotion{{ID: "qty-3-5-10", Caps: []budget.Cap{
		{Measure: budget.Uses, Limit: 1, Per: "customer"}, {Measure: budget.Spend, Limit: 2000}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bg.Rebuild(ctx, nil); err != nil {
		t.Fatal(err)
	}
	h := newServer(c, serverOptions{MinorDigits: 2, Budget: bg})
	price := func(body string, code int, schema string) map[string]any {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/cart/price", strings.NewReader(body)))
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || rec.Code != code {
			t.Fatalf("%s: %d %s, want %d", body, rec.Code, rec.Body.String(), code)
		}
		validate(t, doc, body, map[string]any{"$ref": "#/components/schemas/" + schema}, out)
		return out
	}
	type want struct {
		discount, total string
		budget          string // the line's budget member as JSON (keys sorted), "" for none
	}
	check := func(customer, qty string, w want) {
		t.Helper()
		body := `{"customer": "` + customer + `", "lines": [{"promotion": "qty-3-5-10", "quantity": ` + qty + `, "base": "` + qty + `0.00"},
			{"promotion": "bundle-2-for-30", "quantity": 2, "base": "40.00"}]}`
		out := price(body, http.StatusOK, "CartResponse")
		lines := out["lines"].([]any)
		l0, l1 := lines[0].(map[string]any), lines[1].(map[string]any)
		got := ""
		if b, ok := l0["budget"]; ok {
			js, _ := json.Marshal(b)
			got = string(js)
		}
		if l0["discount"] != w.discount || out["discount"] != w.total || got != w.budget {
			t.Errorf("%s x%s: discount %v total %v budget %s; want %s %s %s", customer, qty, l0["discount"], out["discount"], got, w.discount, w.total, w.budget)
		}
		if _, ok := l1["budget"]; ok || l1["outcome"] != "tier" {
			t.Errorf("an uncapped promotion's line: %v", l1)
		}
	}
	check("c1", "7", want{"14.00", "24.00", `{"available":true,"spend_left":"20.00","uses_left":1}`})
	if _, err := bg.Reserve(ctx, budget.Request{Order: "o1", Attributes: map[string]string{"customer": "c1"}, Hold: time.Hour,
		Lines: []budget.Line{{Promotion: "qty-3-5-10", Uses: 1, Amount: 1400}}}); err != nil {
		t.Fatal(err)
	}
	check("c1", "7", want{"0.00", "10.00", `{"available":false,"spend_left":"6.00","uses_left":0}`})
	check("c2", "7", want{"0.00", "10.00", `{"available":false,"spend_left":"6.00","uses_left":1}`})
	check("c2", "3", want{"3.00", "13.00", `{"available":true,"spend_left":"6.00","uses_left":1}`})

	out := price(`{"lines": [{"promotion": "qty-3-5-10", "quantity": 3, "base": "30.00"}]}`, http.StatusBadRequest, "Problem")
	if out["field"] != "customer" {
		t.Errorf("no customer: %v", out)
	}
	// Not capped per customer here: no customer needed.
	price(`{"lines": [{"promotion": "bundle-2-for-30", "quantity": 2, "base": "40.00"}]}`, http.StatusOK, "CartResponse")

	rt, err := testredis.CountRoundTrips(ctx, rc)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		rt.Reset()
		check("c2", "3", want{"3.00", "13.00", `{"available":true,"spend_left":"6.00","uses_left":1}`})
		if n := rt.Total(); n != 2 {
			t.Fatalf("a priced cart took %d round trips, want 2 (match, offers)", n)
		}
	}
}
