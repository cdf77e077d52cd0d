package budget_test

import (
	"context"
	"testing"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/testredis"
)

// newBudget is a built budget (Rebuild with no redemptions) under b's
// prefix, with promos defined.
func newBudget(t *testing.T, ctx context.Context, b *testredis.Backend, opts budget.Options, promos ...budget.Promotion) *budget.Budget {
	t.Helper()
	bg := unbuilt(t, b, opts, promos...)
	if _, err := bg.Rebuild(ctx, nil); err != nil {
		t.Fatal(err)
	}
	return bg
}

// unbuilt is budget "shop" under b's prefix, with promos defined, not
// built: over a budget another Budget built, or one Rebuild is tested on.
func unbuilt(t *testing.T, b *testredis.Backend, opts budget.Options, promos ...budget.Promotion) *budget.Budget {
	t.Helper()
	opts.Prefix = b.Prefix
	opts.Promotions = promos
	bg, err := budget.New(b.Client, "shop", opts)
	if err != nil {
		t.Fatal(err)
	}
	return bg
}

func line(p string, uses, amount int64) []budget.Line {
	return []budget.Line{{Promotion: p, Uses: uses, Amount: amount}}
}

func customer(c string) map[string]string { return map[string]string{"customer": c} }
