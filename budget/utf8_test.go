package budget_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/testredis"
)

// TestAttributeInvalidUTF8: an attribute that is not UTF-8 is refused.
// Accepted, it would count under its raw bytes in Redis while the
// record, the confirmation and so a ledger hold it JSON-encoded, with
// U+FFFD in place of the bad bytes: a Rebuild from that ledger would
// count another customer, and the customer could redeem past the cap.
func TestAttributeInvalidUTF8(t *testing.T) {
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		bg := newBudget(t, ctx, b, budget.Options{},
			budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 1, Per: "customer"}}})
		reserve := func(order string, attrs map[string]string) error {
			_, err := bg.Reserve(ctx, budget.Request{Order: order, Attributes: attrs, Lines: line("p", 1, 0), Hold: time.Minute})
			return err
		}
		if err := reserve("o0", map[string]string{"customer": "c", "\xff": "x"}); !errors.Is(err, &budget.ValidationError{Field: "attributes"}) {
			t.Errorf("an attribute name not UTF-8: %v, want a *ValidationError with Field \"attributes\"", err)
		}
		err := reserve("o1", customer("\xff"))
		if errors.Is(err, &budget.ValidationError{Field: "attributes"}) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		c, err := bg.Confirm(ctx, "o1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bg.Rebuild(ctx, []budget.Redemption{{Order: c.Order, Attributes: c.Attributes, Lines: c.Lines, At: c.At}}); err != nil {
			t.Fatal(err)
		}
		err = reserve("o2", customer("\xff"))
		t.Fatalf("a value not UTF-8 was accepted (confirmed as %q); after a rebuild from its confirmation the same customer reserves again: %v",
			c.Attributes["customer"], err)
	})
}
