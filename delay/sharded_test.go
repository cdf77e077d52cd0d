package delay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/keyscan"
	"github.com/tierset/tierset/internal/slot"
	"github.com/tierset/tierset/internal/testredis"
)

func shNew(t *testing.T, b *testredis.Backend, name string, k int, o Options) *Sharded {
	t.Helper()
	o.Prefix = b.Prefix
	s, err := NewSharded(b.Client, name, ShardedOptions{Shards: k, Queue: o})
	if err != nil {
		t.Fatalf("NewSharded(%q, %d): %v", name, k, err)
	}
	return s
}

// shKeysPerShard returns n business keys for every shard of s (FNV spreads
// "order-<i>" keys; we bucket them by shard).
func shKeysPerShard(s *Sharded, n int) [][]string {
	out := make([][]string, len(s.shards))
	for i, full := 0, 0; full < len(s.shards); i++ {
		k := "order-" + strconv.Itoa(i)
		sh := s.shardIndex(k)
		if len(out[sh]) < n {
			out[sh] = append(out[sh], k)
			if len(out[sh]) == n {
				full++
			}
		}
	}
	return out
}

// shServerSlot is the slot Redis itself computes on a cluster (CLUSTER
// KEYSLOT); elsewhere (miniredis answers 163 for every key, a single Redis
// has no cluster support) it is internal/slot's computation, which
// TestClusterKeySlotAgreesWithRedis checks against the server.
func shServerSlot(t *testing.T, ctx context.Context, b *testredis.Backend, key string) int {
	t.Helper()
	if !b.IsCluster() {
		return slot.Of(key)
	}
	s, err := b.Client.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatalf("CLUSTER KEYSLOT %q: %v", key, err)
	}
	return int(s)
}

func TestShardedBadOptions(t *testing.T) {
	t.Parallel()
	b := testredis.Mini(t)
	tests := []struct {
		name   string
		qname  string
		shards int
		want   error
	}{
		{"negative_shards", "q", -1, &ValidationError{Field: "options"}},
		{"too_many_shards", "q", maxShards + 1, &ValidationError{Field: "options"}},
		{"brace_in_name", "q{x}", 2, &ValidationError{Field: "name"}},
		{"empty_name", "", 2, &ValidationError{Field: "name"}},
		{"shard_name_too_long", strings.Repeat("n", maxNameBytes-1), 10, &ValidationError{Field: "name"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewSharded(b.Client, tc.qname, ShardedOptions{Shards: tc.shards, Queue: Options{Prefix: b.Prefix}})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	s, err := NewSharded(b.Client, "q", ShardedOptions{})
	if err != nil || len(s.shards) != defaultShards {
		t.Fatalf("zero options: len %d err %v, want %d shards", len(s.shards), err, defaultShards)
	}
	if n, _ := testredis.CountKeys(context.Background(), b.Client, b.Prefix); n != 0 {
		t.Fatalf("NewSharded wrote %d keys", n)
	}
}

// TestShardedNilTask: the calls that route by the task refuse a nil one
// as Queue's do, instead of panicking on its key.
func TestShardedNilTask(t *testing.T) {
	t.Parallel()
	b := testredis.Mini(t)
	ctx := testCtx(t)
	s, err := NewSharded(b.Client, "q", ShardedOptions{Shards: 2, Queue: Options{Prefix: b.Prefix}})
	if err != nil {
		t.Fatal(err)
	}
	rows := []struct {
		name string
		call func() error
	}{
		{"ack", func() error { return s.ackTask(ctx, nil) }},
		{"retry", func() error { _, err := s.retry(ctx, nil, nil); return err }},
		{"kill", func() error { _, err := s.killTask(ctx, nil, nil); return err }},
		{"extend", func() error { _, err := s.extend(ctx, nil, time.Second); return err }},
	}
	for _, r := range rows {
		if err := r.call(); !errors.Is(err, &ValidationError{Field: "task"}) {
			t.Errorf("%s(nil): %v, want an invalid task", r.name, err)
		}
	}
}

// TestShardKeysShareOneSlot: every key of shard i carries the tag
// {q:<name>:i} and hashes to one slot (by the server's own CLUSTER
// KEYSLOT on the cluster), and different shards use different slots.
func TestShardKeysShareOneSlot(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		s := shNew(t, b, "orders", 8, Options{})
		for i, keys := range shKeysPerShard(s, 5) {
			for _, k := range keys {
				if _, err := s.Enqueue(ctx, Job{Key: k, When: After(time.Hour)}); err != nil {
					t.Fatalf("Enqueue: %v", err)
				}
			}
			// Exercise in-flight and dead keys too.
			if _, err := s.Enqueue(ctx, Job{Key: keys[0] + "-now"}); err != nil {
				t.Fatalf("Enqueue: %v", err)
			}
			if err := slot.Same(s.shards[i].Keys()...); err != nil {
				t.Errorf("shard %d: Keys() span slots: %v", i, err)
			}
		}
		for i := range len(s.shards) {
			bt, err := s.shards[i].takeN(ctx, 10)
			if err != nil {
				t.Fatalf("Take: %v", err)
			}
			for _, task := range bt.Tasks {
				if _, err := s.killTask(ctx, task, errors.New("to the dead set")); err != nil {
					t.Fatalf("Kill: %v", err)
				}
			}
		}
		keys, err := testredis.Keys(ctx, b.Client, b.Prefix)
		if err != nil {
			t.Fatalf("Keys: %v", err)
		}
		slotOfShard := map[string]int{}
		for _, k := range keys {
			tag := slot.Tag(k)
			if !strings.HasPrefix(tag, "q:orders:") {
				t.Errorf("key %q has tag %q, not a shard tag", k, tag)
				continue
			}
			sl := shServerSlot(t, ctx, b, k)
			if prev, ok := slotOfShard[tag]; ok && prev != sl {
				t.Errorf("shard %s: key %q in slot %d, other keys in slot %d", tag, k, sl, prev)
			}
			slotOfShard[tag] = sl
		}
		if len(slotOfShard) != len(s.shards) {
			t.Fatalf("keys of %d shards found (%v), want %d", len(slotOfShard), slotOfShard, len(s.shards))
		}
		seen := map[int]string{}
		for tag, sl := range slotOfShard {
			if other, dup := seen[sl]; dup {
				t.Errorf("shards %s and %s share slot %d", tag, other, sl)
			}
			seen[sl] = tag
		}
		t.Logf("%d keys; shard slots %v", len(keys), slotOfShard)
	})
}

// TestShardPlacementSpreadsOverMasters checks on the real cluster that the
// shards of one logical queue live on all three masters: Placement (from
// the slot map) is compared with where each shard's keys physically are,
// found by scanning every master directly.
func TestShardPlacementSpreadsOverMasters(t *testing.T) {
	t.Parallel()
	b := testredis.Cluster(t)
	cc := b.Client.(*redis.ClusterClient)
	ctx := testCtx(t)
	for _, tc := range []struct {
		name string
		k    int
	}{{"orders", 8}, {"tasks", 3}} {
		t.Run(fmt.Sprintf("name=%s/shards=%d", tc.name, tc.k), func(t *testing.T) {
			s := shNew(t, b, tc.name, tc.k, Options{})
			placement, err := s.Placement(ctx)
			if err != nil {
				t.Fatalf("Placement: %v", err)
			}
			if len(placement) != 3 {
				t.Fatalf("shards on %d masters (%v), want 3", len(placement), placement)
			}
			for _, keys := range shKeysPerShard(s, 1) {
				if _, err := s.Enqueue(ctx, Job{Key: keys[0], When: After(time.Hour)}); err != nil {
					t.Fatalf("Enqueue: %v", err)
				}
			}
			found := map[string][]int{}
			var mu sync.Mutex
			// Braces are literal in a SCAN pattern.
			err = keyscan.Each(ctx, cc, b.Prefix+":{q:"+tc.name+":*}:due", func(_ context.Context, node redis.Cmdable, key string) error {
				tag := slot.Tag(key)
				i, err := strconv.Atoi(tag[strings.LastIndexByte(tag, ':')+1:])
				if err != nil {
					return fmt.Errorf("key %q: %w", key, err)
				}
				addr := node.(*redis.Client).Options().Addr
				mu.Lock()
				found[addr] = append(found[addr], i)
				mu.Unlock()
				return nil
			})
			if err != nil {
				t.Fatalf("scan masters: %v", err)
			}
			for addr, shards := range placement {
				got := fmt.Sprint(shSortedInts(found[addr]))
				if want := fmt.Sprint(shSortedInts(shards)); got != want {
					t.Errorf("master %s: Placement says shards %s, its keys say %s", addr, want, got)
				}
			}
			t.Logf("placement %v", placement)
		})
	}
}

func shSortedInts(v []int) []int {
	out := append([]int(nil), v...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestShardCancelByKeyFindsItsTask: Cancel by business key goes to exactly
// one shard in one round trip (one node on the cluster) and finds the
// task, pending or in flight; duplicates of (key, token) stay in one shard.
func TestShardCancelByKeyFindsItsTask(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		s := shNew(t, b, "carts", 4, Options{})
		const n = 100
		keys := make([]string, n)
		for i := range keys {
			keys[i] = "cart-" + strconv.Itoa(i)
			e, err := s.Enqueue(ctx, Job{Key: keys[i], Token: "expire", When: After(time.Hour)})
			if err != nil {
				t.Fatalf("Enqueue: %v", err)
			}
			dup, err := s.Enqueue(ctx, Job{Key: keys[i], Token: "expire", When: After(time.Minute)})
			if err != nil || !dup.Duplicate || dup.ID != e.ID {
				t.Fatalf("re-Enqueue of (%s, expire): %+v %v; want duplicate of %s", keys[i], dup, err, e.ID)
			}
		}
		// One task per shard due now and taken in flight, to cancel it there.
		inflight := map[string]bool{}
		for i, ks := range shKeysPerShard(s, 1) {
			now := ks[0] + "-now"
			for s.shardIndex(now) != i {
				now += "x"
			}
			if _, err := s.Enqueue(ctx, Job{Key: now}); err != nil {
				t.Fatalf("Enqueue: %v", err)
			}
			keys = append(keys, now)
		}
		for i := range len(s.shards) {
			bt, err := s.shards[i].takeN(ctx, 1)
			if err != nil {
				t.Fatalf("Take: %v", err)
			}
			for _, task := range bt.Tasks {
				inflight[task.Key] = true
			}
		}
		// Load the scripts on every node first, so EVALSHA is not retried
		// as EVAL inside the measured calls.
		for _, ks := range shKeysPerShard(s, 1) {
			if _, err := s.For(ks[0]+"-absent").Cancel(ctx, Selector{Key: ks[0] + "-absent"}); err != nil {
				t.Fatalf("warm-up Cancel: %v", err)
			}
		}
		rt, err := testredis.CountRoundTrips(ctx, b.Client)
		if err != nil {
			t.Fatalf("CountRoundTrips: %v", err)
		}
		for _, k := range keys {
			rt.Reset()
			r, err := s.For(k).Cancel(ctx, Selector{Key: k})
			if err != nil {
				t.Fatalf("Cancel(%s): %v", k, err)
			}
			if r.Found != 1 || (inflight[k] && r.InFlight != 1) || (!inflight[k] && r.Pending != 1) {
				t.Errorf("Cancel(%s) = %+v, want 1 task (in flight: %v)", k, r, inflight[k])
			}
			if got := rt.Total(); got != 1 {
				t.Errorf("Cancel(%s): %d round trips, want 1", k, got)
			}
			if per := rt.PerNode(); b.IsCluster() && len(per) != 1 {
				t.Errorf("Cancel(%s) reached nodes %v, want one", k, per)
			}
			if infos, err := lookup(ctx, s.For(k), k); err != nil || (!inflight[k] && len(infos) != 0) {
				t.Errorf("Lookup(%s) after Cancel = %v, %v", k, infos, err)
			}
		}
		if len(inflight) != len(s.shards) {
			t.Fatalf("%d tasks in flight, want one per shard (%d)", len(inflight), len(s.shards))
		}
		stats, err := s.Stats(ctx)
		if err != nil {
			t.Fatalf("Stats: %v", err)
		}
		for i, st := range stats {
			if st.Pending != 0 || st.InFlight != 1 {
				t.Errorf("shard %d after cancelling all: pending %d in flight %d, want 0 and 1 (cancelled, awaiting ack)", i, st.Pending, st.InFlight)
			}
		}
	})
}

// TestShardOrderingWithinShard: tasks enqueued through the sharded
// batch path come out of each shard in enqueue order, including many in
// the same millisecond (sequence assigned by the shard's script).
func TestShardOrderingWithinShard(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		s := shNew(t, b, "ordered", 4, Options{})
		base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
		const n = 600
		jobs := make([]Job, n)
		for i := range jobs {
			// 100 tasks per millisecond over 6 ms, on keys spread over shards.
			jobs[i] = Job{Key: "o-" + strconv.Itoa(i), Payload: []byte(strconv.Itoa(i)),
				When: At(base.Add(time.Duration(i/100) * time.Millisecond))}
		}
		res, err := s.EnqueueBatch(ctx, jobs)
		if err != nil {
			t.Fatalf("EnqueueBatch: %v", err)
		}
		want := make([][]string, len(s.shards))
		for i, r := range res {
			if r.Err != nil || r.ID == "" {
				t.Fatalf("job %d: %+v", i, r)
			}
			sh := s.shardIndex(jobs[i].Key)
			want[sh] = append(want[sh], jobs[i].Key)
		}
		for i := range len(s.shards) {
			var got []string
			for {
				bt, err := s.shards[i].takeN(ctx, 7) // small batches: order must hold across takes
				if err != nil {
					t.Fatalf("Take: %v", err)
				}
				if len(bt.Tasks) == 0 {
					break
				}
				for _, task := range bt.Tasks {
					if s.shardIndex(task.Key) != i {
						t.Fatalf("task %s of shard %d found in shard %d", task.Key, s.shardIndex(task.Key), i)
					}
					got = append(got, task.Key)
					if err := s.ackTask(ctx, task); err != nil {
						t.Fatalf("Ack: %v", err)
					}
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want[i]) {
				t.Errorf("shard %d order:\n got %v\nwant %v", i, got, want[i])
			}
			if len(want[i]) == 0 {
				t.Errorf("shard %d got no tasks: keys do not spread", i)
			}
		}
	})
}

// TestShardOfSpreadsAndIsStable: sequential business keys spread evenly
// for every K (a plain "FNV mod K" fails this for K a power of two, since
// FNV's low bits only see the low bits of each byte), and the mapping is
// pinned: it is part of the data layout, so a change would strand tasks.
func TestShardOfSpreadsAndIsStable(t *testing.T) {
	t.Parallel()
	b := testredis.Mini(t)
	for _, k := range []int{2, 3, 4, 8, 16, 64} {
		t.Run(fmt.Sprintf("shards=%d", k), func(t *testing.T) {
			s := shNew(t, b, "spread", k, Options{})
			const n = 32000
			counts := make([]int, k)
			for i := range n {
				counts[s.shardIndex("order-"+strconv.Itoa(i))]++
			}
			for i, c := range counts {
				if want := n / k; c < want*85/100 || c > want*115/100 {
					t.Errorf("shard %d got %d of %d keys, want %d ± 15%%", i, c, n, want)
				}
			}
		})
	}
	s := shNew(t, b, "pinned", 8, Options{})
	got := ""
	for _, key := range []string{"order-0", "order-1", "order-2", "cart:42", "é"} {
		got += strconv.Itoa(s.shardIndex(key))
	}
	if want := "12514"; got != want {
		t.Errorf("ShardOf mapping changed: got %s, want %s", got, want)
	}
}
