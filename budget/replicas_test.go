package budget_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/testredis"
)

// TestFaultRebuildNotReplicated: with Options.Replicas and no replica to
// acknowledge (every write's WAIT answers 0), each Rebuild step took
// effect on the master and is ErrNotReplicated. Rebuild goes on to the
// end of its steps and returns the new epoch with ErrNotReplicated: the
// budget is built, not left mid-rebuild answering ErrLost. Twice: the
// first build (begin, end), then from a ledger (begin, three adds, end:
// more orders than one step sends) that names an order still held.
func TestFaultRebuildNotReplicated(t *testing.T) {
	b := testredis.Redis(t)
	ctx := testredis.Ctx(t)
	const limit, orders = 1000, 501 // rebuildBatch is 500: two steps of orders
	bg := unbuilt(t, b, budget.Options{Replicas: 1, ReplicaTimeout: 10 * time.Millisecond}, capPromo(limit, false))
	if _, err := bg.Reserve(ctx, unknownReq("led-0")); !errors.Is(err, budget.ErrLost) {
		t.Fatalf("before any Rebuild: %v, want ErrLost", err)
	}
	first, err := bg.Rebuild(ctx, nil)
	if !errors.Is(err, budget.ErrNotReplicated) || first == "" {
		t.Fatalf("first Rebuild: epoch %q, %v; want an epoch and ErrNotReplicated", first, err)
	}
	// led-0 is held now and in the ledger's redemptions below: its
	// record becomes confirmed and the ledger's count replaces its hold.
	if res, err := bg.Reserve(ctx, unknownReq("led-0")); !errors.Is(err, budget.ErrNotReplicated) || !res.New {
		t.Fatalf("Reserve led-0: %+v, %v; want a new hold and ErrNotReplicated", res, err)
	}
	reds := make([]budget.Redemption, orders)
	at := time.Now()
	for i := range reds {
		reds[i] = budget.Redemption{Order: fmt.Sprintf("led-%d", i), Lines: line("p", 1, 0), At: at}
	}
	epoch, err := bg.Rebuild(ctx, reds)
	if !errors.Is(err, budget.ErrNotReplicated) || epoch == "" || epoch == first {
		t.Fatalf("Rebuild: epoch %q (first %q), %v; want a new epoch and ErrNotReplicated", epoch, first, err)
	}
	if left := remaining(t, ctx, bg); left != limit-orders {
		t.Errorf("remaining %d after the rebuild, want %d", left, limit-orders)
	}
	res, err := bg.Reserve(ctx, unknownReq("after"))
	if !errors.Is(err, budget.ErrNotReplicated) || !res.New || res.State != budget.Held {
		t.Fatalf("Reserve after the rebuild: %+v, %v; want a new hold and ErrNotReplicated", res, err)
	}
	if left := remaining(t, ctx, bg); left != limit-orders-1 {
		t.Errorf("remaining %d after one more hold, want %d", left, limit-orders-1)
	}
	// A ledger's Confirm of a redemption Rebuild counted counts nothing
	// again (the record Rebuild made is confirmed).
	if _, err := bg.Confirm(ctx, "led-0"); err != nil && !errors.Is(err, budget.ErrNotReplicated) {
		t.Fatalf("Confirm of a rebuilt redemption: %v", err)
	}
	if left := remaining(t, ctx, bg); left != limit-orders-1 {
		t.Errorf("remaining %d after confirming a rebuilt redemption, want %d", left, limit-orders-1)
	}
}
