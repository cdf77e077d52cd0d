package cache

import (
	"errors"
	"testing"

	"github.com/tierset/tierset/internal/slot"
)

// TestSameSlotGuard: the guard run before every refresh and delete
// transaction refuses keys of two promotions (two hash tags) with
// ErrCrossSlot and accepts one promotion's layout.
func TestSameSlotGuard(t *testing.T) {
	t.Parallel()
	c := &Cache{prefix: "tierset"}
	tests := []struct {
		name string
		keys []string
		want error
	}{
		{"one_promotion", []string{c.tiersKey("p1"), c.metaKey("p1"), c.giftsKey("p1", "v1"), c.giftsKey("p1", "v0")}, nil},
		{"two_promotions", []string{c.tiersKey("p1"), c.metaKey("p2")}, ErrCrossSlot},
		{"untagged_key", []string{c.tiersKey("p1"), "tierset:p1:meta"}, ErrCrossSlot},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := sameSlot(tc.keys...)
			if !errors.Is(err, tc.want) {
				t.Fatalf("sameSlot = %v, want %v", err, tc.want)
			}
			if tc.want != nil && !errors.Is(err, slot.ErrCrossSlot) {
				t.Fatalf("sameSlot = %v, does not wrap slot.ErrCrossSlot", err)
			}
		})
	}
}
