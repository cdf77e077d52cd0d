package budget_test

import (
	"errors"
	"testing"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/testredis"
)

// TestAdvWirePerName: a cap's Per attribute name that no Request could
// carry (a request's attribute names are UTF-8 without control
// characters, '=' or '@') is refused when the promotion is defined, as a
// ValidationError naming the cap, not accepted and then refused by every
// Reserve.
func TestAdvWirePerName(t *testing.T) {
	for _, tc := range []struct {
		name, per string
	}{
		{"invalid UTF-8", "cust\xff"},
		{"tab", "cust\tomer"},
		{"equals", "cust=omer"},
		{"at", "cust@omer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := budget.New(testredis.Mini(t).Client, "shop", budget.Options{Promotions: []budget.Promotion{
				{ID: "p", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 1, Per: tc.per}}}}})
			if !errors.Is(err, &budget.ValidationError{Field: "cap"}) {
				t.Errorf("Per %q: %v, want a ValidationError naming the cap", tc.per, err)
			}
		})
	}
}
