package delay

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/testredis"
)

// v010Entry is a registry entry as a v0.1.0 pool writes it: the same
// keys and JSON, without the release field.
const v010Entry = `{"id":"old-pool","host":"h","pid":7,"mode":"weighted","concurrency":4,"running":1,` +
	`"lines":[{"name":"rel","queues":["rel"],"weight":1,"running":1}],` +
	`"started":"2026-01-02T03:04:05Z","interval":"1s","version":"v0.1.0"}`

// TestRegistryOlderRelease: during a rolling deploy a pool of the
// previous release (its entry carries no release) is listed and counted
// by Health beside this release's pools, with Release 0, so the queue is
// VerdictServed, never VerdictNoWorker, while only old workers hold it, and a reader
// tells which workers run the older release.
func TestRegistryOlderRelease(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		q := namedQ(t, b, "rel", Options{})
		mustEnqueue(t, ctx, q, Job{Key: "k"})
		waitFor(t, 5*time.Second, "a task due", func() bool {
			st, err := q.Stats(ctx)
			return err == nil && st.Ready == 1
		})
		live, base := registryKeys(b.Prefix)
		if err := b.Client.Set(ctx, base+"old-pool", v010Entry, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if err := b.Client.ZAdd(ctx, live, redis.Z{Score: float64(time.Now().UnixMilli()), Member: "old-pool"}).Err(); err != nil {
			t.Fatal(err)
		}
		h, err := q.Health(ctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if h.Verdict != VerdictServed || len(h.Workers) != 1 || h.Workers[0].ID != "old-pool" || h.Workers[0].Release != 0 {
			t.Fatalf("only an old pool serves the queue: verdict %v, workers %+v", h.Verdict, h.Workers)
		}

		p, _ := NewPool(PoolOptions{Concurrency: 1, Heartbeat: time.Second, ID: "new-pool"})
		hold := make(chan struct{})
		if err := p.Add(q, func(ctx context.Context, _ *Task) error { <-hold; return nil }, QueueOptions{}); err != nil {
			t.Fatal(err)
		}
		stop := runFunc(t, p.Run)
		t.Cleanup(func() { close(hold); _ = stop() })
		releases := map[string]int{}
		waitFor(t, 5*time.Second, "both pools listed", func() bool {
			h, err = q.Health(ctx, time.Hour)
			if err != nil || len(h.Workers) != 2 {
				return false
			}
			for _, w := range h.Workers {
				releases[w.ID] = w.Release
			}
			return true
		})
		if releases["old-pool"] != 0 || releases["new-pool"] != workerRelease {
			t.Fatalf("releases %v, want old-pool 0 and new-pool %d", releases, workerRelease)
		}
	})
}
