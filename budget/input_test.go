package budget_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/testredis"
)

// snapshot is every key under prefix with its DUMP, to show a refused
// call wrote nothing.
func snapshot(t *testing.T, ctx context.Context, c redis.UniversalClient, prefix string) map[string]string {
	t.Helper()
	keys, err := testredis.Keys(ctx, c, prefix)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, k := range keys {
		// DUMP is not in miniredis for every type: read each by its type.
		var v any
		var err error
		switch typ := c.Type(ctx, k).Val(); typ {
		case "string":
			v, err = c.Get(ctx, k).Result()
		case "hash":
			v, err = c.HGetAll(ctx, k).Result()
		case "zset":
			v, err = c.ZRangeWithScores(ctx, k, 0, -1).Result()
		case "set":
			var m []string
			m, err = c.SMembers(ctx, k).Result()
			slices.Sort(m)
			v = m
		case "stream":
			v, err = c.XRange(ctx, k, "-", "+").Result()
		default:
			t.Fatalf("key %s of type %q", k, typ)
		}
		if err != nil {
			t.Fatal(err)
		}
		out[k] = fmt.Sprint(v)
	}
	return out
}

// TestBadInput: every refused input is a *ValidationError naming it, and
// nothing is written.
func TestBadInput(t *testing.T) {
	ok := func(r *budget.Request) {}
	cases := []struct {
		field string
		edit  func(r *budget.Request)
	}{
		{"order", func(r *budget.Request) { r.Order = "" }},
		{"order", func(r *budget.Request) { r.Order = "a\nb" }},
		{"order", func(r *budget.Request) { r.Order = strings.Repeat("x", budget.MaxOrderBytes+1) }},
		{"uses", func(r *budget.Request) { r.Lines[0].Uses = -1 }},
		{"uses", func(r *budget.Request) { r.Lines[0].Uses = 0 }},
		{"uses", func(r *budget.Request) { r.Lines[0].Uses = budget.MaxAmount + 1 }},
		{"amount", func(r *budget.Request) { r.Lines[0].Amount = -5 }},
		{"amount", func(r *budget.Request) { r.Lines[0].Amount = budget.MaxAmount + 1 }},
		{"hold", func(r *budget.Request) { r.Hold = 0 }},
		{"hold", func(r *budget.Request) { r.Hold = -time.Second }},
		{"hold", func(r *budget.Request) { r.Hold = time.Hour + time.Millisecond }},
		{"promotion", func(r *budget.Request) { r.Lines[0].Promotion = "unknown" }},
		{"lines", func(r *budget.Request) { r.Lines = nil }},
		{"lines", func(r *budget.Request) { r.Lines = append(r.Lines, r.Lines[0]) }},
		{"lines", func(r *budget.Request) { r.Lines = make([]budget.Line, budget.MaxLines+1) }},
		{"attributes", func(r *budget.Request) { r.Attributes = nil }},
		{"attributes", func(r *budget.Request) { r.Attributes = map[string]string{"customer": "a\tb"} }},
		{"attributes", func(r *budget.Request) { r.Attributes["x=y"] = "1" }},
	}
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		bg := newBudget(t, ctx, b, budget.Options{MaxHold: time.Hour},
			budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 10, Per: "customer"}}})
		base := func() budget.Request {
			return budget.Request{Order: "o", Attributes: customer("c"), Lines: line("p", 1, 100), Hold: time.Minute}
		}
		// A valid reservation first, so there is state to keep unchanged.
		r0 := base()
		ok(&r0)
		r0.Order = "first"
		if _, err := bg.Reserve(ctx, r0); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, ctx, b.Client, b.Prefix)
		for i, tc := range cases {
			r := base()
			tc.edit(&r)
			_, err := bg.Reserve(ctx, r)
			if !errors.Is(err, budget.ErrInvalid) || !errors.Is(err, &budget.ValidationError{Field: tc.field}) {
				t.Errorf("case %d: want invalid %s, got %v", i, tc.field, err)
			}
		}
		for _, order := range []string{"", "a\x00b"} {
			if _, err := bg.Confirm(ctx, order); !errors.Is(err, &budget.ValidationError{Field: "order"}) {
				t.Errorf("confirm %q: %v", order, err)
			}
			if _, err := bg.Release(ctx, order); !errors.Is(err, &budget.ValidationError{Field: "order"}) {
				t.Errorf("release %q: %v", order, err)
			}
			if _, err := bg.Expire(ctx, order); !errors.Is(err, &budget.ValidationError{Field: "order"}) {
				t.Errorf("expire %q: %v", order, err)
			}
		}
		if _, err := bg.Remaining(ctx, nil, "p"); !errors.Is(err, &budget.ValidationError{Field: "attributes"}) {
			t.Errorf("remaining without customer: %v", err)
		}
		if _, err := bg.Remaining(ctx, customer("c"), "nope"); !errors.Is(err, &budget.ValidationError{Field: "promotion"}) {
			t.Errorf("remaining unknown: %v", err)
		}
		if _, err := bg.Rebuild(ctx, []budget.Redemption{{Lines: line("p", 1, 0), Attributes: customer("c")}}); !errors.Is(err, &budget.ValidationError{Field: "redemption"}) {
			t.Errorf("rebuild without time: %v", err)
		}
		if after := snapshot(t, ctx, b.Client, b.Prefix); !maps.Equal(before, after) {
			t.Fatalf("a refused call wrote: %d keys before, %d after", len(before), len(after))
		}
	})
}

// TestBadDefinition: promotions and options refused at New and Define.
func TestBadDefinition(t *testing.T) {
	b := testredis.Mini(t)
	cases := []struct {
		field string
		name  string
		p     budget.Promotion
		o     budget.Options
	}{
		{"name", "", budget.Promotion{ID: "p"}, budget.Options{}},
		{"name", "a{b}", budget.Promotion{ID: "p"}, budget.Options{}},
		{"prefix", "n", budget.Promotion{ID: "p"}, budget.Options{Prefix: "a b"}},
		{"promotion", "n", budget.Promotion{ID: ""}, budget.Options{}},
		{"promotion", "n", budget.Promotion{ID: "a:b"}, budget.Options{}},
		{"location", "n", budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 1, Period: budget.Day}}}, budget.Options{}},
		{"cap", "n", budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Uses, Limit: -1}}}, budget.Options{}},
		{"cap", "n", budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Spend, Limit: budget.MaxAmount + 1}}}, budget.Options{}},
		{"cap", "n", budget.Promotion{ID: "p", Caps: []budget.Cap{{Limit: 1}}}, budget.Options{}},
		{"cap", "n", budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 1, Per: "a=b"}}}, budget.Options{}},
		{"cap", "n", budget.Promotion{ID: "p", MaxPerCart: -1}, budget.Options{}},
		{"options", "n", budget.Promotion{ID: "p"}, budget.Options{MaxHold: time.Microsecond}},
		{"options", "n", budget.Promotion{ID: "p"}, budget.Options{Replicas: -1}},
		{"options", "n", budget.Promotion{ID: "p"}, budget.Options{ExpiryToken: "a,b"}},
	}
	for i, tc := range cases {
		tc.o.Promotions = []budget.Promotion{tc.p}
		_, err := budget.New(b.Client, tc.name, tc.o)
		if !errors.Is(err, &budget.ValidationError{Field: tc.field}) {
			t.Errorf("case %d: want invalid %s, got %v", i, tc.field, err)
		}
	}
	noDeadlines := redis.NewClient(&redis.Options{Addr: b.Mini.Addr()})
	t.Cleanup(func() { _ = noDeadlines.Close() })
	if _, err := budget.New(noDeadlines, "n", budget.Options{}); !errors.Is(err, &budget.ValidationError{Field: "options"}) {
		t.Errorf("a client without ContextTimeoutEnabled: %v", err)
	}
	if n, _ := testredis.CountKeys(testredis.Ctx(t), b.Client, ""); n != 0 {
		t.Fatalf("New wrote %d keys", n)
	}
}
