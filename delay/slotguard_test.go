package delay

import (
	"context"
	"errors"
	"testing"

	"github.com/tierset/tierset/internal/slot"
	"github.com/tierset/tierset/internal/testredis"
)

// TestSlotGuardRefusesCrossSlotScript: a script whose keys span two hash
// slots is refused with ErrCrossSlot before anything is sent (0 round
// trips), on every backend, so the refusal does not depend on Redis
// answering CROSSSLOT (miniredis never does).
func TestSlotGuardRefusesCrossSlotScript(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		rt, err := testredis.CountRoundTrips(ctx, b.Client)
		if err != nil {
			t.Fatalf("CountRoundTrips: %v", err)
		}
		if err := b.Client.Ping(ctx).Err(); err != nil {
			t.Fatalf("ping: %v", err)
		}
		rt.Reset()
		bad := []string{b.Prefix + ":{q:a}:due", b.Prefix + ":{q:b}:inflight"}
		_, err = run(ctx, b.Client, scriptStats, "stats", bad)
		if !errors.Is(err, ErrCrossSlot) || !errors.Is(err, slot.ErrCrossSlot) {
			t.Fatalf("err = %v, want ErrCrossSlot", err)
		}
		if n := rt.Total(); n != 0 {
			t.Fatalf("%d round trips before the refusal, want 0", n)
		}
		q, err := New(b.Client, "guarded", Options{Prefix: b.Prefix})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if err := slot.Same(q.Keys()...); err != nil {
			t.Fatalf("the queue's own keys span slots: %v", err)
		}
	})
}
