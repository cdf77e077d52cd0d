package slot_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tierset/tierset/internal/slot"
	"github.com/tierset/tierset/internal/testredis"
)

func TestTag(t *testing.T) {
	t.Parallel()
	cases := []struct{ key, tag string }{
		{"tierset:{p:10086}:tiers", "p:10086"},
		{"plain", "plain"},
		{"a{}b", "a{}b"},   // empty tag: whole key
		{"a{b}{c}", "b"},   // first tag wins
		{"a{b", "a{b"},     // unclosed
		{"{}{x}", "{}{x}"}, // first { then } immediately: whole key
		{"x}{y}", "y"},     // a } before the first { is ignored
	}
	for _, c := range cases {
		if got := slot.Tag(c.key); got != c.tag {
			t.Errorf("Tag(%q) = %q, want %q", c.key, got, c.tag)
		}
	}
}

// Known slots from the Redis Cluster specification and CLUSTER KEYSLOT.
func TestOfKnownSlots(t *testing.T) {
	t.Parallel()
	cases := []struct {
		key  string
		slot int
	}{
		{"123456789", 12739}, // CRC16-XMODEM check value 0x31C3
		{"foo", 12182},
		{"bar", 5061},
		{"{user1000}.following", 3443},
		{"{user1000}.followers", 3443},
	}
	for _, c := range cases {
		if got := slot.Of(c.key); got != c.slot {
			t.Errorf("Of(%q) = %d, want %d", c.key, got, c.slot)
		}
	}
}

func TestSame(t *testing.T) {
	t.Parallel()
	if err := slot.Same("t:{p:1}:tiers", "t:{p:1}:meta", "t:{p:1}:gifts:ab"); err != nil {
		t.Errorf("same tag refused: %v", err)
	}
	if err := slot.Same("t:{p:1}:tiers", "t:{p:2}:meta"); !errors.Is(err, slot.ErrCrossSlot) {
		t.Errorf("different tags: %v", err)
	}
	if err := slot.Same(); err != nil {
		t.Error(err)
	}
}

// On real Redis (single node and cluster) CLUSTER KEYSLOT must agree with
// the client-side computation; miniredis always answers 163, so it proves
// nothing here.
func TestOfAgreesWithRedis(t *testing.T) {
	t.Parallel()
	testredis.EachReal(t, func(t *testing.T, b *testredis.Backend) {
		if !b.IsCluster() {
			t.Skip("CLUSTER KEYSLOT needs cluster mode")
		}
		ctx := context.Background()
		for _, k := range []string{"tierset:{p:10086}:tiers", "tierset:{q:orders:2}:due", "plain-key", "a{b}{c}", "{}x"} {
			want, err := b.Client.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := slot.Of(k); int64(got) != want {
				t.Errorf("Of(%q) = %d, Redis says %d", k, got, want)
			}
		}
	})
}
