package opsview

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/budget"
)

// Budget is one budget as the listings show it (budget.Info).
type Budget struct {
	Name string `json:"name"`
	// At is Redis TIME of the read.
	At time.Time `json:"at"`
	// Holds is the number of live holds; Partial says Held counts only
	// the first budget.MaxInfoHolds.
	Holds      int64         `json:"holds"`
	Partial    bool          `json:"partial,omitempty"`
	Promotions []BudgetPromo `json:"promotions"`
	// Error is set when the budget could not be read (its state lost, or
	// definitions never published).
	Error string `json:"error,omitempty"`
}

// BudgetPromo is one promotion of a budget.
type BudgetPromo struct {
	ID         string      `json:"id"`
	MaxPerCart int64       `json:"max_per_cart,omitempty"`
	Holds      int64       `json:"holds"`
	Caps       []BudgetCap `json:"caps"`
}

// BudgetCap is one cap now, in its current period.
type BudgetCap struct {
	// Cap names it: "uses", "spend per customer per day in Europe/Berlin".
	Cap   string `json:"cap"`
	Limit int64  `json:"limit"`
	// Start and End bound the period counted now (period caps only).
	Start *time.Time `json:"start,omitempty"`
	End   *time.Time `json:"end,omitempty"`
	Used  int64      `json:"used"`
	Held  int64      `json:"held"`
	// Values and Most: per-attribute caps only (values counted, the most
	// one used).
	Values    int64 `json:"values,omitempty"`
	Most      int64 `json:"most,omitempty"`
	Remaining int64 `json:"remaining"`
}

// BudgetOf is in's view.
func BudgetOf(in budget.Info) Budget {
	v := Budget{Name: in.Budget, At: in.At, Holds: in.Holds, Partial: in.Partial, Promotions: make([]BudgetPromo, 0, len(in.Promotions))}
	for _, p := range in.Promotions {
		bp := BudgetPromo{ID: p.ID, MaxPerCart: p.MaxPerCart, Holds: p.Holds, Caps: make([]BudgetCap, 0, len(p.Caps))}
		for _, c := range p.Caps {
			bc := BudgetCap{Cap: c.Cap.String(), Limit: c.Cap.Limit, Used: c.Used, Held: c.Held, Values: c.Values, Most: c.Most, Remaining: c.Remaining}
			if !c.Start.IsZero() {
				s, e := c.Start.UTC(), c.End.UTC()
				bc.Start, bc.End = &s, &e
			}
			bp.Caps = append(bp.Caps, bc)
		}
		v.Promotions = append(v.Promotions, bp)
	}
	return v
}

// ReadBudget opens the budget called name under prefix from its
// published definitions (budget.Open) and reads its Info. A budget whose
// state is lost is a view with Error set, not an error: a listing shows
// it.
func ReadBudget(ctx context.Context, c redis.UniversalClient, prefix, name string) (Budget, error) {
	b, err := budget.Open(ctx, c, name, budget.Options{Prefix: prefix})
	if err != nil {
		return Budget{}, err
	}
	in, err := b.Info(ctx)
	switch {
	case errors.Is(err, budget.ErrLost):
		return Budget{Name: name, Promotions: []BudgetPromo{}, Error: err.Error()}, nil
	case err != nil:
		return Budget{}, fmt.Errorf("budget %q: %w", name, err)
	}
	v := BudgetOf(in)
	if len(v.Promotions) == 0 {
		v.Error = "no published definitions (call Budget.Publish)"
	}
	return v, nil
}

// ReadBudgets reads every budget under prefix (budget.List), by name.
func ReadBudgets(ctx context.Context, c redis.UniversalClient, prefix string) ([]Budget, error) {
	names, err := budget.List(ctx, c, prefix)
	if err != nil {
		return nil, err
	}
	out := make([]Budget, 0, len(names))
	for _, n := range names {
		v, err := ReadBudget(ctx, c, prefix, n)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// BudgetOrder is an order's record (budget.Order).
type BudgetOrder struct {
	Budget     string            `json:"budget"`
	Order      string            `json:"order"`
	State      string            `json:"state"`
	Attributes map[string]string `json:"attributes,omitempty"`
	Lines      []BudgetLine      `json:"lines"`
	Reserved   *time.Time        `json:"reserved,omitempty"`
	Expires    *time.Time        `json:"expires,omitempty"`
	Confirmed  *time.Time        `json:"confirmed,omitempty"`
}

// BudgetLine is one line of an order.
type BudgetLine struct {
	Promotion string `json:"promotion"`
	Uses      int64  `json:"uses"`
	Amount    int64  `json:"amount"`
}

// BudgetOrderOf is o's view.
func BudgetOrderOf(name string, o budget.OrderInfo) BudgetOrder {
	t := func(x time.Time) *time.Time {
		if x.IsZero() {
			return nil
		}
		u := x.UTC()
		return &u
	}
	v := BudgetOrder{Budget: name, Order: o.Order, State: string(o.State), Attributes: o.Attributes, Lines: make([]BudgetLine, 0, len(o.Lines)),
		Reserved: t(o.Reserved), Expires: t(o.Expires), Confirmed: t(o.Confirmed)}
	for _, l := range o.Lines {
		v.Lines = append(v.Lines, BudgetLine{Promotion: l.Promotion, Uses: l.Uses, Amount: l.Amount})
	}
	return v
}
