package console

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/opsview"
)

// TestFaultBudgetsEvictedCounter: a budget whose counter was evicted
// while its epoch stayed (DEL stands for the eviction) is listed on
// /api/budgets with why, as a lost budget, not with its whole cap left;
// a budget with a period cap in a fixed zone is listed with its caps.
func TestFaultBudgetsEvictedCounter(t *testing.T) {
	t.Parallel()
	eachConsole(t, true, func(t *testing.T, f *consoleFixture) {
		ctx := t.Context()
		mk := func(name string, c budget.Cap) *budget.Budget {
			t.Helper()
			bg, err := budget.New(f.b.Client, name, budget.Options{Prefix: f.b.Prefix, Promotions: []budget.Promotion{{ID: "p", Caps: []budget.Cap{c}}}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := bg.Rebuild(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if err := bg.Publish(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := bg.Reserve(ctx, budget.Request{Order: "o1", Lines: []budget.Line{{Promotion: "p", Uses: 1}}, Hold: time.Hour}); err != nil {
				t.Fatal(err)
			}
			return bg
		}
		evicted := mk("evicted", budget.Cap{Measure: budget.Uses, Limit: 5})
		mk("fixed", budget.Cap{Measure: budget.Uses, Limit: 5, Period: budget.Day, Location: time.FixedZone("UTC+3", 3*3600)})
		if err := f.b.Client.Del(ctx, evicted.Keys()[0]+"c:p").Err(); err != nil {
			t.Fatal(err)
		}
		code, body := get(t, browser(t), f.url+"/api/budgets")
		var vs []opsview.Budget
		if err := json.Unmarshal([]byte(body), &vs); code != http.StatusOK || err != nil || len(vs) != 2 {
			t.Fatalf("/api/budgets: %d %v\n%s", code, err, body)
		}
		if vs[0].Name != "evicted" || vs[0].Error == "" || len(vs[0].Promotions) != 0 {
			t.Errorf("evicted counter: %+v, want listed as lost", vs[0])
		}
		if vs[1].Name != "fixed" || vs[1].Error != "" || len(vs[1].Promotions) != 1 || vs[1].Promotions[0].Caps[0].Used != 1 {
			t.Errorf("fixed-zone budget: %+v", vs[1])
		}
	})
}
