package tierset_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/slot"
	"github.com/tierset/tierset/internal/testredis"
)

// These tests need a real Redis Cluster (TIERSET_REDIS_CLUSTER); miniredis
// never says CROSSSLOT and answers CLUSTER KEYSLOT with 163 for every key,
// and a single Redis accepts any key set, so neither proves anything here.

// TestClusterIsReal checks that the cluster backend every suite runs a
// third time against is a healthy three-master Redis Cluster, not a single
// node that merely accepts hash tags.
func TestClusterIsReal(t *testing.T) {
	b := testredis.Cluster(t)
	cc := clusterClient(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	//lint:ignore SA1019 the tests read the slot map as delay.Sharded does (CLUSTER SLOTS, see sharded.go)
	ranges, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatalf("CLUSTER SLOTS: %v", err)
	}
	masters := map[string]int{}
	covered := 0
	for _, r := range ranges {
		if len(r.Nodes) == 0 {
			t.Fatalf("slot range %d-%d has no node", r.Start, r.End)
		}
		masters[r.Nodes[0].Addr] += r.End - r.Start + 1
		covered += r.End - r.Start + 1
	}
	if covered != slot.Count {
		t.Errorf("slot ranges cover %d slots, want %d", covered, slot.Count)
	}
	if len(masters) != 3 {
		t.Errorf("slots are served by %d masters (%v), want 3", len(masters), masters)
	}

	var nMasters atomic.Int32 // ForEachMaster runs the callbacks concurrently
	err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		info, err := m.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER INFO: %w", m.Options().Addr, err)
		}
		fields := testredis.InfoFields(info)
		if fields["cluster_state"] != "ok" {
			return fmt.Errorf("%s: cluster_state:%s", m.Options().Addr, fields["cluster_state"])
		}
		if fields["cluster_size"] != "3" {
			return fmt.Errorf("%s: cluster_size:%s, want 3", m.Options().Addr, fields["cluster_size"])
		}
		if fields["cluster_slots_ok"] != strconv.Itoa(slot.Count) {
			return fmt.Errorf("%s: cluster_slots_ok:%s", m.Options().Addr, fields["cluster_slots_ok"])
		}
		nMasters.Add(1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := nMasters.Load(); n != 3 {
		t.Errorf("ForEachMaster visited %d masters, want 3", n)
	}
	t.Logf("cluster: %d masters, slots per master %v", len(masters), masters)
}

// TestClusterKeySlotAgreesWithRedis checks internal/slot's hashing (tag
// extraction and CRC16) against the server's CLUSTER KEYSLOT, including
// the corner cases of the hash-tag rule, so the client-side guard refuses
// exactly what Redis would.
func TestClusterKeySlotAgreesWithRedis(t *testing.T) {
	b := testredis.Cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys := []string{
		"", "a", "tierset:{p:10086}:tiers", "tierset:{p:10086}:gifts:7",
		"tierset:{q:orders}:due", "tierset:{q:orders:2}:due",
		"{}", "{}x", "a{}b{c}", "{a}{b}", "x{a", "x}a{", "{{a}}", "a{b}c{d}",
		"😀{é}", strings.Repeat("k", 1000),
	}
	for i := range 200 {
		keys = append(keys, "key:"+strconv.Itoa(i), "{p:"+strconv.Itoa(i)+"}:meta")
	}
	for _, k := range keys {
		want, err := b.Client.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %q: %v", k, err)
		}
		if got := slot.Of(k); int64(got) != want {
			t.Errorf("slot.Of(%q) = %d, Redis says %d", k, got, want)
		}
	}
}

// TestClusterCrossSlot proves on the real cluster that an atomic operation
// over keys of two slots is refused by Redis with CROSSSLOT, that the
// library's key shapes (one hash tag per promotion, one per queue) are
// accepted, and that the client-side guard refuses a cross-slot key set
// before a single byte is sent.
func TestClusterCrossSlot(t *testing.T) {
	b := testredis.Cluster(t)
	cc := clusterClient(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// Two un-tagged keys in different slots that the same master serves:
	// then a MULTI sent to that master queues both SETs (no MOVED) and
	// Redis itself must refuse EXEC with CROSSSLOT.
	k1, k2 := untaggedPairOnOneMaster(t, ctx, cc, b.Prefix)
	if slot.Of(k1) == slot.Of(k2) {
		t.Fatalf("test setup: %q and %q share slot %d", k1, k2, slot.Of(k1))
	}
	tagged := [][]string{
		// The cache's layout for one promotion (cache/keys.go).
		{b.Prefix + ":{p:10086}:tiers", b.Prefix + ":{p:10086}:meta", b.Prefix + ":{p:10086}:gifts:3"},
		// The delay queue's layout for one queue (delay/keys.go), and one
		// shard of a sharded queue.
		{b.Prefix + ":{q:orders}:due", b.Prefix + ":{q:orders}:inflight", b.Prefix + ":{q:orders}:tasks", b.Prefix + ":{q:orders}:wake"},
		{b.Prefix + ":{q:orders:2}:due", b.Prefix + ":{q:orders:2}:inflight", b.Prefix + ":{q:orders:2}:tasks"},
	}
	script := redis.NewScript(`for i, k in ipairs(KEYS) do redis.call('SET', k, ARGV[1]) end return #KEYS`)

	t.Run("eval_untagged_is_CROSSSLOT", func(t *testing.T) {
		err := script.Run(ctx, cc, []string{k1, k2}, "x").Err()
		requireCrossSlot(t, err)
		requireAbsent(t, ctx, cc, k1, k2)
	})

	t.Run("multi_untagged_is_CROSSSLOT", func(t *testing.T) {
		master, err := cc.MasterForKey(ctx, k1)
		if err != nil {
			t.Fatalf("MasterForKey: %v", err)
		}
		_, err = master.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, k1, "x", time.Minute)
			p.Set(ctx, k2, "x", time.Minute)
			return nil
		})
		requireCrossSlot(t, err)
		requireAbsent(t, ctx, cc, k1, k2)
	})

	t.Run("cluster_client_refuses_cross_slot_tx", func(t *testing.T) {
		// go-redis's ClusterClient refuses a cross-slot MULTI on its own
		// (it would otherwise have to pick one node); it is a second,
		// independent client-side guard.
		_, err := cc.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, k1, "x", time.Minute)
			p.Set(ctx, k2, "x", time.Minute)
			return nil
		})
		if !errors.Is(err, redis.ErrCrossSlot) {
			t.Fatalf("ClusterClient.TxPipelined over two slots: err = %v, want redis.ErrCrossSlot", err)
		}
		requireAbsent(t, ctx, cc, k1, k2)
	})

	for _, keys := range tagged {
		name := strings.TrimPrefix(keys[0], b.Prefix+":")
		t.Run("tagged_accepted/"+name, func(t *testing.T) {
			if err := slot.Same(keys...); err != nil {
				t.Fatalf("slot.Same: %v", err)
			}
			n, err := script.Run(ctx, cc, keys, "v").Int()
			if err != nil || n != len(keys) {
				t.Fatalf("EVAL over one tag: n=%d err=%v", n, err)
			}
			_, err = cc.TxPipelined(ctx, func(p redis.Pipeliner) error {
				for _, k := range keys {
					p.Set(ctx, k, "w", time.Minute)
				}
				return nil
			})
			if err != nil {
				t.Fatalf("MULTI over one tag: %v", err)
			}
			for _, k := range keys {
				if v, err := cc.Get(ctx, k).Result(); err != nil || v != "w" {
					t.Errorf("GET %q = %q, %v; want w", k, v, err)
				}
			}
		})
	}

	t.Run("client_guard_sends_nothing", func(t *testing.T) {
		rt, err := testredis.CountRoundTrips(ctx, cc)
		if err != nil {
			t.Fatalf("CountRoundTrips: %v", err)
		}
		if err := cc.Ping(ctx).Err(); err != nil {
			t.Fatalf("ping: %v", err)
		}
		bad := []struct {
			name string
			keys []string
		}{
			{"two_untagged_keys", []string{k1, k2}},
			{"two_promotions", []string{b.Prefix + ":{p:1}:tiers", b.Prefix + ":{p:2}:tiers"}},
			{"two_shards_of_a_queue", []string{b.Prefix + ":{q:orders:0}:due", b.Prefix + ":{q:orders:1}:due"}},
			{"tagged_and_untagged", []string{b.Prefix + ":{p:1}:tiers", b.Prefix + ":p:1:meta"}},
			{"empty_tag_hashes_whole_key", []string{b.Prefix + ":{}:a", b.Prefix + ":{}:b"}},
		}
		for _, tc := range bad {
			rt.Reset()
			err := guardedRun(ctx, cc, script, tc.keys, "x")
			if !errors.Is(err, slot.ErrCrossSlot) {
				t.Errorf("%s: err = %v, want slot.ErrCrossSlot", tc.name, err)
			}
			if n := rt.Total(); n != 0 {
				t.Errorf("%s: %d round trips before refusing, want 0", tc.name, n)
			}
			requireAbsent(t, ctx, cc, tc.keys...)
		}
		// The counter itself works: a guarded call over one tag is sent.
		rt.Reset()
		if err := guardedRun(ctx, cc, script, tagged[0], "y"); err != nil {
			t.Fatalf("guarded run over one tag: %v", err)
		}
		if n := rt.Total(); n == 0 {
			t.Fatalf("guarded run over one tag counted 0 round trips; the counter is blind")
		}
	})
}

// guardedRun is the pattern the library applies before every script and
// transaction: check the keys' slots on the client, then send.
func guardedRun(ctx context.Context, c redis.Scripter, s *redis.Script, keys []string, args ...any) error {
	if err := slot.Same(keys...); err != nil {
		return err
	}
	return s.Run(ctx, c, keys, args...).Err()
}

func clusterClient(t *testing.T, b *testredis.Backend) *redis.ClusterClient {
	t.Helper()
	cc, ok := b.Client.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("cluster backend client is %T, want *redis.ClusterClient", b.Client)
	}
	return cc
}

// untaggedPairOnOneMaster finds two keys without hash tags under prefix
// that hash to different slots served by the same master.
func untaggedPairOnOneMaster(t *testing.T, ctx context.Context, cc *redis.ClusterClient, prefix string) (string, string) {
	t.Helper()
	//lint:ignore SA1019 the tests read the slot map as delay.Sharded does (CLUSTER SLOTS, see sharded.go)
	ranges, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatalf("CLUSTER SLOTS: %v", err)
	}
	owner := func(s int) string {
		for _, r := range ranges {
			if s >= r.Start && s <= r.End && len(r.Nodes) > 0 {
				return r.Nodes[0].Addr
			}
		}
		return ""
	}
	first := prefix + ":plain:0"
	for i := 1; i < 1000; i++ {
		k := prefix + ":plain:" + strconv.Itoa(i)
		if slot.Of(k) != slot.Of(first) && owner(slot.Of(k)) == owner(slot.Of(first)) {
			return first, k
		}
	}
	t.Fatalf("no two un-tagged keys on one master among 1000 candidates")
	return "", ""
}

func requireCrossSlot(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("cross-slot operation succeeded; want a CROSSSLOT error from Redis")
	}
	if !redis.HasErrorPrefix(err, "CROSSSLOT") {
		t.Fatalf("err = %v, want a CROSSSLOT error from Redis", err)
	}
}

func requireAbsent(t *testing.T, ctx context.Context, cc *redis.ClusterClient, keys ...string) {
	t.Helper()
	for _, k := range keys {
		n, err := cc.Exists(ctx, k).Result()
		if err != nil {
			t.Fatalf("EXISTS %q: %v", k, err)
		}
		if n != 0 {
			t.Errorf("%q was written by a refused operation", k)
		}
	}
}
