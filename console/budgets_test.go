package console

import (
	"encoding/json"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/opsview"
)

var budgetRowRe = regexp.MustCompile(`<tr data-promo="([^"]*)" data-cap="([^"]*)" data-used="(\d+)" data-held="(\d+)" data-remaining="(\d+)">`)

// TestBudgetsPage: the budgets page lists every cap of a published
// budget with its used, held and remaining, as /api/budgets answers
// them; a promotion ID holding markup is escaped; a budget built but
// never published says so; off loopback the page needs the login, and
// with Redis down it is the 503 banner.
func TestBudgetsPage(t *testing.T) {
	t.Parallel()
	eachConsole(t, true, func(t *testing.T, f *consoleFixture) {
		ctx := t.Context()
		promo := `<b>x</b>&`
		bg, err := budget.New(f.b.Client, "shop", budget.Options{Prefix: f.b.Prefix, Promotions: []budget.Promotion{
			{ID: promo, MaxPerCart: 3, Caps: []budget.Cap{{Measure: budget.Uses, Limit: 10}, {Measure: budget.Spend, Limit: 900, Per: "customer"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bg.Rebuild(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if err := bg.Publish(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := bg.Reserve(ctx, budget.Request{Order: "o1", Attributes: map[string]string{"customer": "c1"},
			Lines: []budget.Line{{Promotion: promo, Uses: 2, Amount: 300}}, Hold: time.Hour}); err != nil {
			t.Fatal(err)
		}
		unpublished, err := budget.New(f.b.Client, "bare", budget.Options{Prefix: f.b.Prefix})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := unpublished.Rebuild(ctx, nil); err != nil {
			t.Fatal(err)
		}
		c := browser(t)
		code, body := get(t, c, f.url+"/budgets")
		if code != http.StatusOK {
			t.Fatalf("GET /budgets: %d\n%s", code, body)
		}
		if strings.Contains(body, "<b>x") {
			t.Errorf("the promotion ID is not escaped:\n%s", body)
		}
		got := map[string][3]string{}
		for _, m := range budgetRowRe.FindAllStringSubmatch(body, -1) {
			if html.UnescapeString(m[1]) != promo {
				t.Errorf("row of promotion %q", m[1])
			}
			got[m[2]] = [3]string{m[3], m[4], m[5]}
		}
		want := map[string][3]string{"uses": {"2", "2", "8"}, "spend per customer": {"300", "300", "600"}}
		if len(got) != len(want) || got["uses"] != want["uses"] || got["spend per customer"] != want["spend per customer"] {
			t.Errorf("rows %v, want %v", got, want)
		}
		for _, s := range []string{`data-budget="bare"`, "no published definitions", `data-cap="uses per cart"`, `id="budget-total" data-total="2"`} {
			if !strings.Contains(body, s) {
				t.Errorf("page lacks %q", s)
			}
		}
		code, body = get(t, c, f.url+"/api/budgets")
		var vs []opsview.Budget
		if err := json.Unmarshal([]byte(body), &vs); code != http.StatusOK || err != nil || len(vs) != 2 {
			t.Fatalf("/api/budgets: %d %v\n%s", code, err, body)
		}
		if vs[0].Name != "bare" || vs[0].Error == "" || vs[1].Name != "shop" || vs[1].Holds != 1 ||
			vs[1].Promotions[0].Caps[1] != (opsview.BudgetCap{Cap: "spend per customer", Limit: 900, Used: 300, Held: 300, Values: 1, Most: 300, Remaining: 600}) {
			t.Errorf("/api/budgets: %+v", vs)
		}
		closed := seedConsole(t, f.b, false)
		for _, page := range []string{"/budgets", "/api/budgets"} {
			if code, _ := get(t, browser(t), closed.url+page); code == http.StatusOK {
				t.Errorf("off loopback, %s without login: %d", page, code)
			}
		}
	})
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 200 * time.Millisecond, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	srv, err := New(t.Context(), Options{Client: client, Token: webToken, Loopback: true, Queues: []string{"orders"}, IDsTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	hs := newServer(t, srv)
	for _, page := range []string{"/budgets", "/api/budgets"} {
		if code, body := get(t, browser(t), hs+page); code != http.StatusServiceUnavailable || !strings.Contains(body, "connect") {
			t.Errorf("GET %s with Redis down: %d", page, code)
		}
	}
}
