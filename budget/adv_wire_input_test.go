package budget_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/testredis"
)

// wirePromos are promotions whose IDs need JSON escaping or are plain,
// with caps of several shapes (so a batch sends several caps strings).
func wirePromos() []budget.Promotion {
	return []budget.Promotion{
		{ID: "p", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 1000},
			{Measure: budget.Spend, Limit: budget.MaxAmount},
			{Measure: budget.Uses, Limit: 5, Per: "customer"}}},
		{ID: `q"<&>'é`, Caps: []budget.Cap{{Measure: budget.Uses, Limit: 1000, Per: "zone"}}},
		{ID: "d", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 1000, Period: budget.Day, Location: time.UTC},
			{Measure: budget.Spend, Limit: budget.MaxAmount, Period: budget.Week, Location: time.UTC, Per: "customer"}}},
		{ID: "x\u00b7y", Caps: nil}, // no caps at all: an empty caps string
	}
}

type wireCase struct {
	name  string
	r     budget.Request
	field string // "" accepted, else the ValidationError's field
}

// wireCases are requests with every kind of awkward text in the order,
// the attributes and the promotions.
func wireCases() []wireCase {
	long := strings.Repeat("é", budget.MaxValueBytes/2) // 200 bytes
	ok := func(name, order string, attrs map[string]string, lines ...budget.Line) wireCase {
		return wireCase{name: name, r: budget.Request{Order: order, Attributes: attrs, Lines: lines, Hold: time.Hour}}
	}
	bad := func(name, field, order string, attrs map[string]string, lines ...budget.Line) wireCase {
		c := ok(name, order, attrs, lines...)
		c.field = field
		return c
	}
	p := budget.Line{Promotion: "p", Uses: 1, Amount: 5}
	q := budget.Line{Promotion: `q"<&>'é`, Uses: 2}
	d := budget.Line{Promotion: "d", Uses: 1, Amount: budget.MaxAmount}
	x := budget.Line{Promotion: "x\u00b7y", Uses: budget.MaxAmount, Amount: budget.MaxAmount}
	cz := func(c, z string) map[string]string { return map[string]string{"customer": c, "zone": z} }
	return []wireCase{
		ok("plain", "o-plain", cz("c1", "eu"), p, q),
		ok("quote backslash", `o"\q`, cz(`a"b\c`, `\"`), p, q),
		ok("html", "o<&>", cz("<script>&amp;", ">"), p, d),
		ok("line separators", "o\u2028\u2029", cz("c\u2028", "z\u2029"), p, q, d),
		ok("unicode", "订单-ü", cz("顧客", "ゾーン"), p, q),
		ok("tab-like spaces", "o \u00a0x", cz("a b", " "), p),
		ok("equals at", "o=@:", cz("c=1@2:3", "z=@"), p, q),
		ok("braces glob", "o{b:x}*?[]", cz("{c}*", "[z]"), p, q),
		ok("longest", strings.Repeat("o", budget.MaxOrderBytes), cz(long, long), p, q, d),
		ok("uncapped line", "o-x", cz("c1", "eu"), x),
		ok("no attributes", "o-none", nil, x),
		ok("2^53", "o-max", cz("max", "eu"), budget.Line{Promotion: "p", Uses: 5}, d, x),
		bad("order tab", "order", "o\tx", cz("c", "z"), p),
		bad("order newline", "order", "o\nx", cz("c", "z"), p),
		bad("order NUL", "order", "o\x00x", cz("c", "z"), p),
		bad("order NEL", "order", "o\u0085x", cz("c", "z"), p),
		bad("order invalid UTF-8", "order", "o\xffx", cz("c", "z"), p),
		bad("order empty", "order", "", cz("c", "z"), p),
		bad("order too long", "order", strings.Repeat("o", budget.MaxOrderBytes+1), cz("c", "z"), p),
		bad("value tab", "attributes", "o-vt", cz("c\tx", "z"), p),
		bad("value newline", "attributes", "o-vn", cz("c\nx", "z"), p),
		bad("value NUL", "attributes", "o-v0", cz("c\x00", "z"), p),
		bad("value DEL", "attributes", "o-vd", cz("c\x7f", "z"), p),
		bad("value invalid UTF-8", "attributes", "o-vu", cz("c\xc3", "z"), p),
		bad("value empty", "attributes", "o-ve", cz("", "z"), p),
		bad("value too long", "attributes", "o-vl", cz(long+"x", "z"), p),
		bad("name tab", "attributes", "o-nt", map[string]string{"customer": "c", "a\tb": "v"}, p),
		bad("name invalid UTF-8", "attributes", "o-nu", map[string]string{"customer": "c", "a\xff": "v"}, p),
		bad("promotion unknown", "promotion", "o-pu", cz("c", "z"), budget.Line{Promotion: "p\t", Uses: 1}),
		bad("uses 0", "uses", "o-u0", cz("c", "z"), budget.Line{Promotion: "p", Uses: 0}),
		bad("uses past 2^53", "uses", "o-u", cz("c", "z"), budget.Line{Promotion: "p", Uses: budget.MaxAmount + 1}),
		bad("amount past 2^53", "amount", "o-a", cz("c", "z"), budget.Line{Promotion: "p", Uses: 1, Amount: budget.MaxAmount + 1}),
	}
}

// TestAdvWireInputs: every awkward request is either a ValidationError
// naming its field (nothing written) or round-trips exactly: Order and
// Confirm give back its attributes and lines, the log's req decodes to
// them, the same request again answers the same reservation and another
// cart for the order is ErrConflict. Alone (nothing else in flight) and
// all in one batch.
func TestAdvWireInputs(t *testing.T) {
	t.Run("alone", func(t *testing.T) {
		b := testredis.Redis(t)
		ctx := testredis.Ctx(t)
		bg := newBudget(t, ctx, b, budget.Options{}, wirePromos()...)
		var got []budget.Reservation
		var errs []error
		for _, c := range wireCases() {
			res, err := bg.Reserve(ctx, c.r)
			got, errs = append(got, res), append(errs, err)
		}
		checkWire(t, ctx, bg, b.Client, got, errs)
	})
	t.Run("batch", func(t *testing.T) {
		f, bg, ctx, release := heldBatch(t, budget.Options{MaxBatch: 1000}, "p", nil, wirePromos()...)
		cases := wireCases()
		var chs []<-chan outcomeOf
		n := 0
		for _, c := range cases {
			if c.field != "" {
				// refused before the queue
				chs = append(chs, reserveAsync(ctx, bg, c.r))
				continue
			}
			chs = append(chs, reserveAsync(ctx, bg, c.r))
			n++
			queuedBehind(t, bg, n)
		}
		if o := await(t, release()); o.err != nil {
			t.Fatal(o.err)
		}
		var got []budget.Reservation
		var errs []error
		for _, ch := range chs {
			o := await(t, ch)
			got, errs = append(got, o.res), append(errs, o.err)
		}
		checkWire(t, ctx, bg, f.Server.Client(nil), got, errs)
	})
}

// checkWire checks the outcomes of wireCases, in order.
func checkWire(t *testing.T, ctx context.Context, bg *budget.Budget, rdb redis.UniversalClient, got []budget.Reservation, errs []error) {
	t.Helper()
	for i, c := range wireCases() {
		res, err := got[i], errs[i]
		if c.field != "" {
			if !errors.Is(err, &budget.ValidationError{Field: c.field}) {
				t.Errorf("%s: %+v, %v: want a ValidationError naming %q", c.name, res, err, c.field)
			}
			if c.r.Order != "" {
				if _, err := bg.Order(ctx, c.r.Order); !errors.Is(err, budget.ErrNotFound) && !errors.Is(err, budget.ErrInvalid) {
					t.Errorf("%s: refused, yet Order answers %v", c.name, err)
				}
			}
			continue
		}
		if err != nil || !res.New || res.State != budget.Held || res.Order != c.r.Order {
			t.Errorf("%s: %+v, %v: want a new hold", c.name, res, err)
			continue
		}
		oi, err := bg.Order(ctx, c.r.Order)
		if err != nil || !sameCart(oi.Attributes, oi.Lines, c.r) || !oi.Expires.Equal(res.Expires) {
			t.Errorf("%s: Order %+v, %v: want %+v expiring %v", c.name, oi, err, c.r, res.Expires)
		}
		again, err := bg.Reserve(ctx, c.r)
		if err != nil || again.New || !again.Expires.Equal(res.Expires) || again.Epoch != res.Epoch {
			t.Errorf("%s: again %+v, %v: want %+v, not new", c.name, again, err, res)
		}
		// the lines in another order are the same cart
		rev := c.r
		rev.Lines = slices.Clone(c.r.Lines)
		slices.Reverse(rev.Lines)
		if again, err := bg.Reserve(ctx, rev); err != nil || again.New {
			t.Errorf("%s: lines reversed %+v, %v: want the same hold", c.name, again, err)
		}
		other := c.r
		other.Lines = slices.Clone(c.r.Lines)
		other.Lines[0].Uses--
		if other.Lines[0].Uses == 0 {
			other.Lines[0].Uses = 2
		}
		if _, err := bg.Reserve(ctx, other); !errors.Is(err, budget.ErrConflict) {
			t.Errorf("%s: another cart: %v, want ErrConflict", c.name, err)
		}
		if len(c.r.Attributes) > 0 {
			other := c.r
			other.Attributes = maps.Clone(c.r.Attributes)
			other.Attributes["customer"] = "c-other"
			if _, err := bg.Reserve(ctx, other); !errors.Is(err, budget.ErrConflict) {
				t.Errorf("%s: other attributes: %v, want ErrConflict", c.name, err)
			}
		}
		conf, err := bg.Confirm(ctx, c.r.Order)
		if err != nil || !conf.New || !sameCart(conf.Attributes, conf.Lines, c.r) {
			t.Errorf("%s: Confirm %+v, %v: want %+v", c.name, conf, err, c.r)
		}
		if again, err := bg.Reserve(ctx, c.r); err != nil || again.New || again.State != budget.Confirmed {
			t.Errorf("%s: after Confirm %+v, %v: want confirmed, not new", c.name, again, err)
		}
	}
	// every confirmation's req decodes to its cart
	log, err := rdb.XRange(ctx, bg.LogKey(), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	byOrder := map[string]string{}
	for _, e := range log {
		byOrder[e.Values["order"].(string)] = e.Values["req"].(string)
	}
	for _, c := range wireCases() {
		if c.field != "" {
			continue
		}
		req, ok := byOrder[c.r.Order]
		if !ok {
			t.Errorf("%s: no log entry for %q", c.name, c.r.Order)
			continue
		}
		attrs, lines, err := budget.DecodeRequest(req)
		if err != nil || !sameCart(attrs, lines, c.r) {
			t.Errorf("%s: log req %s decodes to %v %v, %v", c.name, req, attrs, lines, err)
		}
	}
}

// sameCart says whether attrs and lines are r's (lines in any order).
func sameCart(attrs map[string]string, lines []budget.Line, r budget.Request) bool {
	if len(attrs) != len(r.Attributes) || (len(attrs) > 0 && !maps.Equal(attrs, r.Attributes)) {
		return false
	}
	cmp := func(x, y budget.Line) int { return strings.Compare(x.Promotion, y.Promotion) }
	a, b := slices.Clone(lines), slices.Clone(r.Lines)
	slices.SortFunc(a, cmp)
	slices.SortFunc(b, cmp)
	return slices.Equal(a, b)
}
