package budget_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/testredis"
)

// TestAdvWireConcurrentMixed: 64 goroutines reserve 1,280 calls of carts
// of four shapes (so batches mix caps strings, shared by some requests
// and not others) for customers whose values need JSON escaping, each
// order sent twice, some the second time with another cart. No cap is
// passed, total, per customer or per day; each order is granted new at
// most once, a conflict only meets an order another cart holds, and the
// counters (Info) are exactly the records' lines.
func TestAdvWireConcurrentMixed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxBatch int
	}{{"default batch", 0}, {"batch of 7", 7}} {
		t.Run(tc.name, func(t *testing.T) {
			b := testredis.Redis(t)
			ctx := testredis.Ctx(t)
			const usesA, perCust, spendA, usesB = 37, 3, 5000, 23
			bg := newBudget(t, ctx, b, budget.Options{MaxBatch: tc.maxBatch},
				budget.Promotion{ID: "a", MaxPerCart: 2, Caps: []budget.Cap{{Measure: budget.Uses, Limit: usesA},
					{Measure: budget.Uses, Limit: perCust, Per: "customer"},
					{Measure: budget.Spend, Limit: spendA, Period: budget.Day, Location: time.UTC}}},
				budget.Promotion{ID: "b", Caps: []budget.Cap{{Measure: budget.Uses, Limit: usesB, Period: budget.Week, Location: time.UTC},
					{Measure: budget.Uses, Limit: usesB + 5}}}, // two counters: week and ever
				budget.Promotion{ID: "c"})
			custs := []string{`c"0`, `c\1`, "c<2>", "c\u2028 3", "c&4", "c5", "c=6", "c@7", "顧客8", `c"\<9`}
			// cart k (second: the order's second call) is a function of k alone
			cart := func(k int, second bool) budget.Request {
				rnd := rand.New(rand.NewPCG(uint64(k), 1))
				a := budget.Line{Promotion: "a", Uses: 1 + rnd.Int64N(2), Amount: rnd.Int64N(300)}
				bl := budget.Line{Promotion: "b", Uses: 1}
				c := budget.Line{Promotion: "c", Uses: 1 + rnd.Int64N(budget.MaxAmount)}
				var lines []budget.Line
				switch rnd.IntN(4) {
				case 0:
					lines = []budget.Line{a}
				case 1:
					lines = []budget.Line{bl}
				case 2:
					lines = []budget.Line{bl, a}
				default:
					lines = []budget.Line{c, a, bl}
				}
				if second && k%3 == 0 {
					lines[0].Uses++
				}
				return budget.Request{Order: fmt.Sprintf("o\"%d<", k), Attributes: customer(custs[rnd.IntN(len(custs))]),
					Lines: lines, Hold: time.Hour}
			}
			const workers, each = 64, 20
			type out struct {
				k      int
				second bool
				res    budget.Reservation
				err    error
			}
			outs := make([]out, workers*each)
			var wg sync.WaitGroup
			for g := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range each {
						idx := g*each + i
						// the two calls of order k are made by goroutines g and g+32
						k := (g%32)*each + i
						second := g >= 32
						res, err := bg.Reserve(ctx, cart(k, second))
						outs[idx] = out{k, second, res, err}
					}
				}()
			}
			wg.Wait()
			newGrants := map[int]int{}
			conflicts := map[int]bool{}
			for _, o := range outs {
				switch {
				case o.err == nil:
					if o.res.New {
						newGrants[o.k]++
					}
				case errors.Is(o.err, budget.ErrConflict):
					conflicts[o.k] = true
				case errors.Is(o.err, budget.ErrLimit):
				default:
					t.Fatalf("order %d: %v", o.k, o.err)
				}
			}
			var uses = map[string]int64{}
			var spend int64
			perC := map[string]int64{}
			held := 0
			for k := range workers / 2 * each {
				oi, err := bg.Order(ctx, fmt.Sprintf("o\"%d<", k))
				if errors.Is(err, budget.ErrNotFound) {
					if newGrants[k] != 0 {
						t.Errorf("order %d granted new, yet no record", k)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				held++
				if newGrants[k] != 1 {
					t.Errorf("order %d: held, granted new %d times", k, newGrants[k])
				}
				first, second := cart(k, false), cart(k, true)
				if !sameCart(oi.Attributes, oi.Lines, first) && !sameCart(oi.Attributes, oi.Lines, second) {
					t.Errorf("order %d holds %v %v, neither of its carts", k, oi.Attributes, oi.Lines)
				}
				for _, l := range oi.Lines {
					uses[l.Promotion] += l.Uses
					if l.Promotion == "a" {
						spend += l.Amount
						perC[oi.Attributes["customer"]] += l.Uses
					}
				}
			}
			for k := range conflicts {
				if k%3 != 0 {
					t.Errorf("order %d: conflict with the same cart", k)
				}
			}
			if held == 0 || uses["a"] > usesA || uses["b"] > usesB || spend > spendA {
				t.Errorf("%d held: uses %v spend %d: past a cap (a %d, b %d, spend %d)", held, uses, spend, usesA, usesB, spendA)
			}
			for c, n := range perC {
				if n > perCust {
					t.Errorf("customer %q: %d uses of a, cap %d", c, n, perCust)
				}
			}
			t.Logf("%d held, %d conflicts, uses %v, spend %d", held, len(conflicts), uses, spend)
			checkWholeCounts(ctx, t, bg, uses, spend, true, "a", "b")
		})
	}
}

// checkWholeCounts checks each promotion's caps that count for the whole
// promotion (no Per) against the uses and spend the records add up to:
// Used, and Held too when every counted reservation is still held.
func checkWholeCounts(ctx context.Context, t *testing.T, bg *budget.Budget, uses map[string]int64, spend int64, held bool, ids ...string) {
	t.Helper()
	info, err := bg.Info(ctx, ids...)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range info.Promotions {
		for _, c := range p.Caps {
			want := uses[p.ID]
			if c.Cap.Measure == budget.Spend {
				want = spend
			}
			if c.Cap.Per != "" {
				continue
			}
			if c.Used != want || (held && c.Held != want) {
				t.Errorf("%s %s: used %d held %d, records %d", p.ID, c.Cap, c.Used, c.Held, want)
			}
		}
	}
}
