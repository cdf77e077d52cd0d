package main

import (
	"context"
	"errors"

	"github.com/shopspring/decimal"
	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/cache"
)

// Offerer is what the service needs of a *budget.Budget: whether each
// hit's promotion can still be given (budget.Budget.Offers), one round
// trip after the match (the match itself is none when the near cache
// holds the ladders).
type Offerer interface {
	Offers(ctx context.Context, attrs map[string]string, rs []cache.Result) ([]budget.Offer, error)
}

// budgetJSON is what a budget still allows the customer for a line's
// promotion. Available false means checkout would refuse the promotion
// now: the line is priced without its discount, so the price shown is
// the price a reservation at checkout honours (barring a race, which the
// reservation then decides).
type budgetJSON struct {
	Available bool `json:"available"`
	// UsesLeft and SpendLeft are absent when no cap counts them.
	UsesLeft  *int64 `json:"uses_left,omitempty"`
	SpendLeft string `json:"spend_left,omitempty"`
}

// offers asks the budget about the cart's hits; nil, nil without one. A
// promotion counted per customer with no customer given is a 400.
func (s *server) offers(ctx context.Context, customer string, rs []cache.Result) ([]budget.Offer, *problem) {
	if s.o.Budget == nil {
		return nil, nil
	}
	var attrs map[string]string
	if customer != "" {
		attrs = map[string]string{"customer": customer}
	}
	offs, err := s.o.Budget.Offers(ctx, attrs, rs)
	switch {
	case errors.Is(err, &budget.ValidationError{Field: "attributes"}):
		return nil, &problem{Type: probBadRequest, Title: "Bad request", Status: 400, Field: "customer",
			Detail: "a promotion of this cart is capped per customer: a customer (1..200 bytes, no control characters) is required"}
	case err != nil:
		s.internal(err)
		return nil, &problem{Type: probUnavailable, Title: "Pricing unavailable", Status: 503,
			Detail: "the promotion budgets did not answer in time; try again"}
	}
	return offs, nil
}

// capped sets the line's budget answer and returns its discount: d when
// the promotion can still be given this discount (a use and d in minor
// units left), else zero.
func (s *server) capped(lr *lineResponse, offs []budget.Offer, i int, d decimal.Decimal, digits int32) decimal.Decimal {
	if offs == nil || !offs[i].Budgeted {
		return d
	}
	o := offs[i]
	b := &budgetJSON{Available: o.OK && o.Left.Allows(1, d.Shift(digits).IntPart())}
	if o.Left.Uses != budget.NoCap {
		b.UsesLeft = &o.Left.Uses
	}
	if o.Left.Spend != budget.NoCap {
		b.SpendLeft = decimal.New(o.Left.Spend, -digits).StringFixed(digits)
	}
	lr.Budget = b
	if !b.Available {
		return decimal.Zero
	}
	return d
}
