package delay

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

// TestShardedReconcile: after every key of a 4-shard queue is lost (the
// test's own keys, as a FLUSHALL would lose them), Sharded.Reconcile puts
// every source task back in its own shard, none twice, and removes a task
// the source lacks from whichever shard holds it; a second pass finds
// every task present. A shard's own Reconcile over the whole source adds
// only its own tasks and reports the others' as OtherShard.
func TestShardedReconcile(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		s := shNew(t, b, "recon", 4, Options{})
		due := time.Now().Add(time.Hour)
		before := due.Add(time.Minute)
		src := make([]Job, 120)
		perShard := make([]int, len(s.shards))
		for i := range src {
			src[i] = Job{Key: "order-" + strconv.Itoa(i), Token: "expire", When: At(due)}
			perShard[s.shardIndex(src[i].Key)]++
		}
		wipe := func() {
			t.Helper()
			keys, err := testredis.Keys(ctx, b.Client, b.Prefix)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if err := b.Client.Del(ctx, k).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
		// each task in its own shard and nowhere else, once
		placed := func(stage string) {
			t.Helper()
			for i, q := range s.Shards() {
				n, err := b.Client.ZCard(ctx, q.k.due).Result()
				if err != nil {
					t.Fatal(err)
				}
				if n != int64(perShard[i]) {
					t.Errorf("%s: shard %d holds %d tasks, want %d", stage, i, n, perShard[i])
				}
			}
			// with every shard's count right, one task of each key in its
			// own shard leaves no room for a copy anywhere
			for _, st := range src {
				if infos, err := lookup(ctx, s.For(st.Key), st.Key); err != nil || len(infos) != 1 {
					t.Fatalf("%s: %s has %d tasks in its shard %d (%v), want 1", stage, st.Key, len(infos), s.shardIndex(st.Key), err)
				}
			}
		}

		wipe()
		// a task the source no longer lists, enqueued before the listing
		stale := Job{Key: "order-stale", Token: "expire", When: At(due)}
		mustEnqueue(t, ctx, s.For(stale.Key), stale)
		res, err := s.Reconcile(ctx, &sliceSource{tasks: src}, before, ReconcileOptions{PageSize: 64})
		if err != nil {
			t.Fatal(err)
		}
		if res.Listed != len(src) || res.Added != len(src) || res.Removed != 1 || res.OtherShard != 0 || res.Invalid != 0 {
			t.Errorf("sharded reconcile after the loss: %+v, want %d listed and added, the stale task removed", res, len(src))
		}
		placed("after Sharded.Reconcile")
		res, err = s.Reconcile(ctx, &sliceSource{tasks: src}, before, ReconcileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Present != len(src) || res.Added != 0 || res.Removed != 0 {
			t.Errorf("second pass: %+v, want every task present", res)
		}

		wipe()
		for i, q := range s.Shards() {
			res, err := q.Reconcile(ctx, &sliceSource{tasks: src}, before, ReconcileOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Added != perShard[i] || res.OtherShard != len(src)-perShard[i] {
				t.Errorf("Shard(%d).Reconcile: %+v, want %d added and %d of other shards skipped",
					i, res, perShard[i], len(src)-perShard[i])
			}
		}
		placed("after each Shard(i).Reconcile")
	})
}
