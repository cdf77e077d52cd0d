package budget_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/testredis"
)

// oneargState is what Redis holds for promotion p: the records by state
// (keys of another type as "foreign") and the counter's uses.
func oneargState(t *testing.T, ctx context.Context, c redis.UniversalClient, bg *budget.Budget) (map[string]string, int64) {
	t.Helper()
	base := bg.Keys()[0]
	keys, err := testredis.Keys(ctx, c, base+"o:")
	if err != nil {
		t.Fatal(err)
	}
	recs := map[string]string{}
	for _, k := range keys {
		order := strings.TrimPrefix(k, base+"o:")
		if typ, err := c.Type(ctx, k).Result(); err != nil || typ != "hash" {
			recs[order] = "foreign"
			continue
		}
		st, err := c.HGet(ctx, k, "st").Result()
		if err != nil {
			t.Fatal(err)
		}
		recs[order] = st
	}
	n, err := c.HGet(ctx, base+"c:p", "u").Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return recs, n
}

// TestAdvOneArgExistsMixed: one batch of new orders around an order that
// already has a record (held, confirmed, released, expired, deleted by
// hand, or replaced by a key of another type), with an order twice with
// its cart and an order twice with two carts: the one EXISTS of the
// batch finds the record, so every request reads its own; the new ones
// are new holds, the duplicate answers the hold its first made, the
// other cart ErrConflict, a foreign key fails its request alone, and
// the counter is the held and confirmed records.
func TestAdvOneArgExistsMixed(t *testing.T) {
	cart := func(order string, uses int64) budget.Request {
		return budget.Request{Order: order, Attributes: customer("c-" + order), Lines: line("p", uses, 0), Hold: time.Hour}
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, ctx context.Context, bg *budget.Budget, admin *redis.Client)
		want  string // the existing order's outcome: new, again, confirmed, damaged
		leak  int64  // uses counted by no record (a record deleted by hand)
	}{
		{"none", nil, "new", 0},
		{"held", func(t *testing.T, ctx context.Context, bg *budget.Budget, _ *redis.Client) {
			if _, err := bg.Reserve(ctx, cart("e", 1)); err != nil {
				t.Fatal(err)
			}
		}, "again", 0},
		{"confirmed", func(t *testing.T, ctx context.Context, bg *budget.Budget, _ *redis.Client) {
			if _, err := bg.Reserve(ctx, cart("e", 1)); err != nil {
				t.Fatal(err)
			}
			if _, err := bg.Confirm(ctx, "e"); err != nil {
				t.Fatal(err)
			}
		}, "confirmed", 0},
		{"released", func(t *testing.T, ctx context.Context, bg *budget.Budget, _ *redis.Client) {
			if _, err := bg.Reserve(ctx, cart("e", 1)); err != nil {
				t.Fatal(err)
			}
			if _, err := bg.Release(ctx, "e"); err != nil {
				t.Fatal(err)
			}
		}, "new", 0},
		{"expired", func(t *testing.T, ctx context.Context, bg *budget.Budget, admin *redis.Client) {
			r := cart("e", 1)
			r.Hold = 50 * time.Millisecond
			res, err := bg.Reserve(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			redisPast(t, ctx, admin, res.Expires)
			if st, err := bg.Release(ctx, "e"); err != nil || st != budget.Expired {
				t.Fatalf("release of the expired hold: %v, %v", st, err)
			}
		}, "new", 0},
		{"expired, purged by the batch", func(t *testing.T, ctx context.Context, bg *budget.Budget, admin *redis.Client) {
			r := cart("e", 1)
			r.Hold = 50 * time.Millisecond
			res, err := bg.Reserve(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			redisPast(t, ctx, admin, res.Expires)
		}, "new", 0},
		{"deleted", func(t *testing.T, ctx context.Context, bg *budget.Budget, admin *redis.Client) {
			if _, err := bg.Reserve(ctx, cart("e", 1)); err != nil {
				t.Fatal(err)
			}
			if err := admin.Del(ctx, bg.Keys()[0]+"o:e").Err(); err != nil {
				t.Fatal(err)
			}
		}, "new", 1},
		{"foreign string", func(t *testing.T, ctx context.Context, bg *budget.Budget, admin *redis.Client) {
			if err := admin.Set(ctx, bg.Keys()[0]+"o:e", "x", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}, "damaged", 0},
		{"foreign list", func(t *testing.T, ctx context.Context, bg *budget.Budget, admin *redis.Client) {
			if err := admin.RPush(ctx, bg.Keys()[0]+"o:e", "st", "h").Err(); err != nil {
				t.Fatal(err)
			}
		}, "damaged", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := func(ctx context.Context, bg *budget.Budget, admin *redis.Client) {
				if tc.setup != nil {
					tc.setup(t, ctx, bg, admin)
				}
			}
			f, bg, ctx, release := oneargHeld(t, budget.Options{}, before, capPromo(100, false))
			reqs := []budget.Request{cart("n1", 1), cart("dup", 1), cart("e", 1), cart("n2", 2), cart("dup", 1),
				cart("k", 1), cart("k", 2), cart("n3", 1), cart("e", 1)}
			var chs []<-chan outcomeOf
			for i, r := range reqs {
				chs = append(chs, reserveAsync(ctx, bg, r))
				queuedBehind(t, bg, i+1)
			}
			if o := await(t, release()); o.err != nil {
				t.Fatal(o.err)
			}
			want := []string{"new", "new", tc.want, "new", "again", "new", "conflict", "new", "again"}
			switch tc.want {
			case "confirmed":
				want[8] = "confirmed"
			case "damaged":
				want[8] = "damaged"
			}
			for i, ch := range chs {
				o := await(t, ch)
				got := "other: " + fmt.Sprint(o.err)
				switch {
				case o.err == nil && o.res.New && o.res.State == budget.Held:
					got = "new"
				case o.err == nil && o.res.State == budget.Held:
					got = "again"
				case o.err == nil && o.res.State == budget.Confirmed && !o.res.New:
					got = "confirmed"
				case errors.Is(o.err, budget.ErrConflict):
					got = "conflict"
				case o.err != nil && strings.Contains(o.err.Error(), "another type"):
					got = "damaged"
				}
				if got != want[i] {
					t.Errorf("request %d (%s): %s (%+v), want %s", i, reqs[i].Order, got, o.res, want[i])
				}
			}
			recs, used := oneargState(t, ctx, f.Server.Client(nil), bg)
			var live int64
			for order, st := range recs {
				if st == "h" || st == "c" {
					live++
					if order == "n2" {
						live++ // two uses
					}
				}
			}
			if used != live+tc.leak {
				t.Errorf("counter %d, want %d (records %v)", used, live+tc.leak, recs)
			}
			for _, o := range []string{"n1", "n2", "n3", "dup", "k"} {
				if recs[o] != "h" {
					t.Errorf("%s: record %q, want h", o, recs[o])
				}
			}
			if tc.want == "damaged" && recs["e"] != "foreign" {
				t.Errorf("the foreign key was changed: %q", recs["e"])
			}
		})
	}
}

// oneargHeld is heldBatch with before given a client of the server
// itself (not through the proxy).
func oneargHeld(t *testing.T, opts budget.Options, before func(ctx context.Context, bg *budget.Budget, admin *redis.Client), promos ...budget.Promotion) (*testredis.Faulty, *budget.Budget, context.Context, func() <-chan outcomeOf) {
	t.Helper()
	f := testredis.StartFaulty(t)
	ctx := testredis.Ctx(t)
	bg := newBudget(t, ctx, &testredis.Backend{Client: f.Cut, Prefix: testredis.Prefix(t)}, opts, promos...)
	if _, err := bg.Reserve(ctx, budget.Request{Order: "warm", Attributes: customer("warm"), Lines: line("p", 1, 0), Hold: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if before != nil {
		admin := f.Server.Client(nil)
		before(ctx, bg, admin)
	}
	h := f.Proxy.HoldNext(faultproxy.Contains("EVALSHA"))
	t.Cleanup(h.Release)
	first := reserveAsync(ctx, bg, budget.Request{Order: "first", Attributes: customer("first"), Lines: line("p", 1, 0), Hold: time.Hour})
	waitHeld(t, h)
	return f, bg, ctx, func() <-chan outcomeOf { h.Release(); return first }
}

// TestAdvOneArgBatchSizes: MaxBatch 1000 with 1000 distinct orders in one
// batch (one EXISTS of 1000 keys), with none or one of them existing,
// and MaxBatch 1 with concurrent callers: grants are exactly the cap,
// each a record, the counter the records.
func TestAdvOneArgBatchSizes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxBatch int
		n        int
		existing bool
		held     bool // queue all n behind a held batch
	}{
		{"1000 fresh", 1000, 1000, false, true},
		{"1000 one existing", 1000, 1000, true, true},
		{"maxbatch 1", 1, 300, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limit := tc.n * 7 / 10
			var release func() <-chan outcomeOf
			var bg *budget.Budget
			var ctx context.Context
			var rdb redis.UniversalClient
			opts := budget.Options{MaxBatch: tc.maxBatch}
			if tc.held {
				var f *testredis.Faulty
				f, bg, ctx, release = heldBatch(t, opts, "p", func(ctx context.Context, bg *budget.Budget) {
					if tc.existing {
						if _, err := bg.Reserve(ctx, budget.Request{Order: "o7", Lines: line("p", 1, 0), Hold: time.Hour}); err != nil {
							t.Fatal(err)
						}
					}
				}, capPromo(int64(limit), false))
				rdb = f.Server.Client(nil)
			} else {
				b := testredis.Redis(t)
				ctx = testredis.Ctx(t)
				bg = newBudget(t, ctx, b, opts, capPromo(int64(limit), false))
				rdb = b.Client
			}
			var mu sync.Mutex
			outs := map[string]outcomeOf{}
			var wg sync.WaitGroup
			for i := range tc.n {
				order := fmt.Sprint("o", i)
				wg.Go(func() {
					res, err := bg.Reserve(ctx, budget.Request{Order: order, Lines: line("p", 1, 0), Hold: time.Hour})
					mu.Lock()
					outs[order] = outcomeOf{res, err}
					mu.Unlock()
				})
			}
			if tc.held {
				queuedBehind(t, bg, tc.n)
				if o := await(t, release()); o.err != nil {
					t.Fatal(o.err)
				}
			}
			wg.Wait()
			recs, used := oneargState(t, ctx, rdb, bg)
			grants, limits := 0, 0
			for order, o := range outs {
				switch {
				case o.err == nil && o.res.New:
					grants++
					if recs[order] != "h" {
						t.Errorf("%s granted, record %q", order, recs[order])
					}
				case o.err == nil && order == "o7" && tc.existing:
					if recs[order] != "h" {
						t.Errorf("%s again, record %q", order, recs[order])
					}
				case errors.Is(o.err, budget.ErrLimit):
					limits++
					if recs[order] != "" {
						t.Errorf("%s refused, record %q", order, recs[order])
					}
				default:
					t.Errorf("%s: %+v, %v", order, o.res, o.err)
				}
			}
			base := 0
			if tc.held {
				base = 2 // warm and first
			}
			if tc.existing {
				base++
			}
			if grants+base != limit || used != int64(limit) || int64(len(recs)) != used {
				t.Errorf("%d grants (+%d before), %d refused, counter %d, %d records: want %d", grants, base, limits, used, len(recs), limit)
			}
		})
	}
}
