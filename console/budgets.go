package console

import (
	"net/http"

	"github.com/tierset/tierset/internal/opsview"
)

// budgetsPage lists every budget under QueuePrefix with each promotion's
// caps: limit, used, held and remaining, in the period counted now. It
// reads the definitions budget.Publish wrote (budget.Open); a budget
// never published, or whose state is lost, is listed with why. Read-only.
func (s *Console) budgetsPage(w http.ResponseWriter, r *http.Request) {
	vs, err := opsview.ReadBudgets(r.Context(), s.cfg.client, s.cfg.queuePrefix)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, "budgets.html", "Budgets", map[string]any{"Budgets": vs, "Prefix": s.cfg.queuePrefix})
}

// apiBudgets answers GET /api/budgets: what the budgets page lists, as
// tierset budget ls -json prints it.
func (s *Console) apiBudgets(w http.ResponseWriter, r *http.Request) {
	vs, err := opsview.ReadBudgets(r.Context(), s.cfg.client, s.cfg.queuePrefix)
	if err != nil {
		apiFail(w, err)
		return
	}
	apiWrite(w, http.StatusOK, vs)
}
