package budget_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/internal/testredis"
)

// TestAdvNilClient: a typed nil client (a nil *redis.Client in the
// interface) is bad input for New and Open, as an untyped nil is, not a
// panic.
func TestAdvNilClient(t *testing.T) {
	ctx := testredis.Ctx(t)
	for name, c := range map[string]budget.Client{"untyped": nil, "*redis.Client": (*redis.Client)(nil), "*redis.ClusterClient": (*redis.ClusterClient)(nil)} {
		t.Run(name, func(t *testing.T) {
			if _, err := budget.New(c, "shop", budget.Options{}); !errors.Is(err, budget.ErrInvalid) {
				t.Fatalf("New: %v, want ErrInvalid", err)
			}
			if _, err := budget.Open(ctx, c, "shop", budget.Options{}); !errors.Is(err, budget.ErrInvalid) {
				t.Fatalf("Open: %v, want ErrInvalid", err)
			}
		})
	}
}

// TestAdvOffersInput: Offers of no results, or of no budgeted hit, is no
// round trip; a hit whose per-customer cap lacks its attribute, or an
// attribute value over MaxValueBytes, is a *ValidationError; a promotion
// with only MaxPerCart leaves MaxPerCart uses.
func TestAdvOffersInput(t *testing.T) {
	b := testredis.Mini(t)
	ctx := testredis.Ctx(t)
	bg := newBudget(t, ctx, b, budget.Options{},
		budget.Promotion{ID: "c", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 1, Per: "customer"}}},
		budget.Promotion{ID: "m", MaxPerCart: 2})
	for _, rs := range [][]cache.Result{nil, {}, {{Promotion: "c"}}, {{Promotion: "x", Tier: &cache.TierHit{}}}} {
		b.Mini.Close() // any round trip fails
		out, err := bg.Offers(ctx, nil, rs)
		if err != nil || len(out) != len(rs) {
			t.Fatalf("Offers(%v) with Redis down: %v %v", rs, out, err)
		}
	}
	if err := b.Mini.Restart(); err != nil {
		t.Fatal(err)
	}
	hit := func(p string) []cache.Result { return []cache.Result{{Promotion: p, Tier: &cache.TierHit{}}} }
	var ve *budget.ValidationError
	for name, attrs := range map[string]map[string]string{"missing": nil, "huge": customer(strings.Repeat("x", budget.MaxValueBytes+1))} {
		if _, err := bg.Offers(ctx, attrs, hit("c")); !errors.As(err, &ve) {
			t.Fatalf("%s attribute: %v, want a *ValidationError", name, err)
		}
	}
	out, err := bg.Offers(ctx, nil, hit("m"))
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Left != (budget.Left{Uses: 2, Spend: budget.NoCap}) || !out[0].OK || !out[0].Left.Allows(2, 1<<53) || out[0].Left.Allows(3, 0) {
		t.Fatalf("MaxPerCart only: %+v", out[0])
	}
}

// TestAdvPublishMany: Publish of many promotions (more than Lua's unpack
// takes at once) writes them all, and Open reads them back; a budget of
// none publishes an empty definition.
func TestAdvPublishMany(t *testing.T) {
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		for _, n := range []int{0, 5000} {
			ps := make([]budget.Promotion, n)
			for i := range ps {
				ps[i] = budget.Promotion{ID: fmt.Sprint("p", i), Caps: []budget.Cap{{Measure: budget.Uses, Limit: int64(i)}}}
			}
			name := fmt.Sprint("shop", n)
			bg, err := budget.New(b.Client, name, budget.Options{Prefix: b.Prefix, Promotions: ps})
			if err != nil {
				t.Fatal(err)
			}
			if err := bg.Publish(ctx); err != nil {
				t.Fatalf("Publish of %d promotions: %v", n, err)
			}
			ob, err := budget.Open(ctx, b.Client, name, budget.Options{Prefix: b.Prefix})
			if err != nil {
				t.Fatal(err)
			}
			if got := len(ob.Promotions()); got != n {
				t.Fatalf("Open read %d promotions of %d", got, n)
			}
		}
	})
}
