package budget_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/testredis"
)

// TestCounterEvicted: a counter key gone while the epoch stays (what an
// eviction under maxmemory does, or a partial loss) would read as 0 and
// grant the whole cap again. Reserve and Remaining answer ErrLost instead,
// for the counter and for the keyset that lists it, until Rebuild puts
// the ledger back; a counter given back to nothing is not taken for lost.
func TestCounterEvicted(t *testing.T) {
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		p := budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 3}}}
		bg := newBudget(t, ctx, b, budget.Options{}, p)
		counter := bg.Keys()[0] + "c:p"
		reserve := func(order string) error {
			_, err := bg.Reserve(ctx, budget.Request{Order: order, Lines: line("p", 1, 0), Hold: time.Minute})
			return err
		}
		// Given back to nothing: the counter key stays (its anchor), and
		// the budget answers.
		if err := reserve("o0"); err != nil {
			t.Fatal(err)
		}
		if _, err := bg.Release(ctx, "o0"); err != nil {
			t.Fatal(err)
		}
		if n, err := b.Client.Exists(ctx, counter).Result(); err != nil || n != 1 {
			t.Fatalf("counter given back to 0: exists %d %v", n, err)
		}
		var ledger []budget.Redemption
		for i := range 3 {
			o := fmt.Sprint("o", i+1)
			if err := reserve(o); err != nil {
				t.Fatal(err)
			}
			c, err := bg.Confirm(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			ledger = append(ledger, budget.Redemption{Order: o, Lines: c.Lines, At: c.At})
		}
		if err := reserve("o4"); !errors.Is(err, budget.ErrLimit) {
			t.Fatalf("at the cap: %v", err)
		}
		for _, lost := range []string{counter, bg.Keys()[5]} {
			if err := b.Client.Del(ctx, lost).Err(); err != nil {
				t.Fatal(err)
			}
			if err := reserve("o4"); !errors.Is(err, budget.ErrLost) {
				t.Fatalf("%s gone: Reserve: %v (want ErrLost, not a grant)", lost, err)
			}
			if _, err := bg.Remaining(ctx, nil, "p"); !errors.Is(err, budget.ErrLost) {
				t.Fatalf("%s gone: Remaining: %v", lost, err)
			}
			if _, err := bg.Rebuild(ctx, ledger); err != nil {
				t.Fatal(err)
			}
			left, err := bg.Remaining(ctx, nil, "p")
			if err != nil || left["p"].Uses != 0 {
				t.Fatalf("rebuilt from the ledger: %+v %v", left, err)
			}
			if err := reserve("o4"); !errors.Is(err, budget.ErrLimit) {
				t.Fatalf("rebuilt: %v", err)
			}
		}
	})
}

// TestCounterEvictedByMaxmemory: the same under a real eviction. A
// private redis-server with maxmemory and allkeys-random is filled until
// the budget's counter is evicted; whatever else went with it, Reserve
// never grants, and Rebuild brings the cap back whole.
func TestCounterEvictedByMaxmemory(t *testing.T) {
	srv := testredis.StartServer(t, "--maxmemory", "4mb", "--maxmemory-policy", "allkeys-random")
	c := srv.Client(nil)
	ctx := testredis.Ctx(t)
	p := budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 2}}}
	bg := newBudget(t, ctx, &testredis.Backend{Client: c, Prefix: "evict"}, budget.Options{}, p)
	var ledger []budget.Redemption
	for _, o := range []string{"a", "b"} {
		if _, err := bg.Reserve(ctx, budget.Request{Order: o, Lines: line("p", 1, 0), Hold: time.Minute}); err != nil {
			t.Fatal(err)
		}
		cf, err := bg.Confirm(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		ledger = append(ledger, budget.Redemption{Order: o, Lines: cf.Lines, At: cf.At})
	}
	counter := bg.Keys()[0] + "c:p"
	junk := strings.Repeat("x", 4096)
	deadline := time.Now().Add(time.Minute)
	for i := 0; ; i++ {
		if n, err := c.Exists(ctx, counter).Result(); err != nil {
			t.Fatal(err)
		} else if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the counter was never evicted")
		}
		pipe := c.Pipeline()
		for j := range 100 {
			pipe.Set(ctx, fmt.Sprintf("junk:%d:%d", i, j), junk, 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_, err := bg.Reserve(ctx, budget.Request{Order: "c", Lines: line("p", 1, 0), Hold: time.Minute})
	if !errors.Is(err, budget.ErrLost) {
		t.Fatalf("counter evicted: Reserve: %v (want ErrLost, not a grant)", err)
	}
	// Make room, as an operator would, then put the ledger back.
	if err := c.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := bg.Rebuild(ctx, ledger); err != nil {
		t.Fatal(err)
	}
	left, err := bg.Remaining(ctx, nil, "p")
	if err != nil || left["p"].Uses != 0 {
		t.Fatalf("rebuilt: %+v %v", left, err)
	}
	if _, err := bg.Reserve(ctx, budget.Request{Order: "c", Lines: line("p", 1, 0), Hold: time.Minute}); !errors.Is(err, budget.ErrLimit) {
		t.Fatalf("rebuilt: %v", err)
	}
}

// TestRebuildLedgerOrders: a ledger's redemption names its order. Rebuild
// counts it once whatever Redis holds of that order (a live hold, a hold
// released or expired, or nothing), and makes its record confirmed, so
// the Confirm the ledger's outbox sends later counts nothing again.
func TestRebuildLedgerOrders(t *testing.T) {
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		p := budget.Promotion{ID: "p", Caps: []budget.Cap{{Measure: budget.Uses, Limit: 10}}}
		bg := newBudget(t, ctx, b, budget.Options{}, p)
		for _, o := range []string{"held", "released", "other"} {
			if _, err := bg.Reserve(ctx, budget.Request{Order: o, Lines: line("p", 2, 0), Hold: time.Minute}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := bg.Release(ctx, "released"); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		ledger := []budget.Redemption{
			{Order: "held", Lines: line("p", 2, 0), At: now},
			{Order: "released", Lines: line("p", 2, 0), At: now},
			{Order: "unknown", Lines: line("p", 2, 0), At: now},
		}
		if _, err := bg.Rebuild(ctx, ledger); err != nil {
			t.Fatal(err)
		}
		// 6 redeemed by the ledger + 2 held by "other".
		want := budget.Left{Uses: 2, Spend: budget.NoCap}
		if left, err := bg.Remaining(ctx, nil, "p"); err != nil || left["p"] != want {
			t.Fatalf("rebuilt: %+v %v (want %+v)", left, err, want)
		}
		for _, o := range []string{"held", "released"} {
			c, err := bg.Confirm(ctx, o)
			if err != nil || c.New {
				t.Fatalf("Confirm %s after the rebuild: %+v %v (want already confirmed)", o, c, err)
			}
		}
		if _, err := bg.Confirm(ctx, "unknown"); !errors.Is(err, budget.ErrNotFound) {
			t.Fatalf("Confirm of an order Redis never saw: %v", err)
		}
		if left, err := bg.Remaining(ctx, nil, "p"); err != nil || left["p"] != want {
			t.Fatalf("after the late confirms: %+v %v (want %+v)", left, err, want)
		}
		_, err := bg.Rebuild(ctx, []budget.Redemption{ledger[0], ledger[0]})
		if !errors.Is(err, &budget.ValidationError{Field: "redemption"}) {
			t.Fatalf("an order twice: %v", err)
		}
	})
}
