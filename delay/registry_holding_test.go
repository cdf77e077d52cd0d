package delay

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/testredis"
)

// holdingBeat is the heartbeat of the holding tests: short, so a test
// waits a few beats, and the poll's deadline is many of them.
const holdingBeat = 200 * time.Millisecond

// A pool whose handlers block lists the IDs they run in its heartbeat
// entry, by queue (shard) name, capped at MaxHoldingListed a line with
// the rest counted; Holder finds the pool by (queue, ID); once the
// handlers return, a later beat lists none.
func TestRegistryHolding(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		shards int // 0: a plain queue
		tasks  int
	}{
		{"queue", 0, 3},
		{"sharded", 3, 6},
		{"capped", 0, MaxHoldingListed + 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
				name := "hold-" + tc.name
				var line Line
				var queues []*Queue
				if tc.shards > 0 {
					s, err := NewSharded(b.Client, name, ShardedOptions{Shards: tc.shards, Queue: Options{Prefix: b.Prefix}})
					if err != nil {
						t.Fatal(err)
					}
					line, queues = s, s.Shards()
					for i := range tc.tasks {
						if _, err := s.Enqueue(ctx, Job{Key: fmt.Sprintf("k%d", i)}); err != nil {
							t.Fatal(err)
						}
					}
				} else {
					q := namedQ(t, b, name, Options{})
					line, queues = q, []*Queue{q}
					fillDue(t, ctx, q, tc.tasks)
				}
				release := make(chan struct{})
				var mu sync.Mutex
				started, n := map[string]bool{}, 0 // IDs: shards' IDs may repeat
				// a sharded line shares its handlers among its shards' takers:
				// room for every task in any one shard
				p, err := NewPool(PoolOptions{Concurrency: tc.tasks * max(1, tc.shards), Heartbeat: holdingBeat, ID: "hold-pool"})
				if err != nil {
					t.Fatal(err)
				}
				h := func(ctx context.Context, task *Task) error {
					mu.Lock()
					started[task.ID] = true
					n++
					mu.Unlock()
					<-release
					return nil
				}
				if err := p.Add(line, h, QueueOptions{}); err != nil {
					t.Fatal(err)
				}
				stop := runFunc(t, p.Run)
				unblock := sync.OnceFunc(func() { close(release) })
				t.Cleanup(unblock)
				waitFor(t, 20*time.Second, "every task started", func() bool {
					mu.Lock()
					defer mu.Unlock()
					return n == tc.tasks
				})
				// what Redis holds in flight, by queue: what the entry must list
				want := map[string][]string{}
				for _, q := range queues {
					pg, err := q.List(ctx, ListOptions{State: StateInFlight, Limit: MaxBatch})
					if err != nil {
						t.Fatal(err)
					}
					for _, ti := range pg.Tasks {
						if !started[ti.ID] {
							t.Fatalf("task %s in flight on %s, never started", ti.ID, q.Name())
						}
						want[q.Name()] = append(want[q.Name()], ti.ID)
					}
					slices.Sort(want[q.Name()])
				}
				var line0 LineInfo
				waitFor(t, 10*time.Second, "an entry listing the running tasks", func() bool {
					ws, err := ListWorkers(ctx, b.Client, b.Prefix)
					if err != nil || len(ws) != 1 || len(ws[0].Lines) != 1 {
						return false
					}
					line0 = ws[0].Lines[0]
					n := line0.HoldingMore
					for _, ids := range line0.Holding {
						n += len(ids)
					}
					return n == tc.tasks
				})
				listed := 0
				for q, ids := range line0.Holding {
					listed += len(ids)
					if !slices.IsSorted(ids) {
						t.Errorf("queue %s: IDs not sorted: %v", q, ids)
					}
					for _, id := range ids {
						if !slices.Contains(want[q], id) {
							t.Errorf("queue %s: listed %s, not in flight there", q, id)
						}
					}
				}
				wantMore := max(0, tc.tasks-MaxHoldingListed)
				if listed != tc.tasks-wantMore || line0.HoldingMore != wantMore {
					t.Fatalf("listed %d with %d more, want %d with %d more", listed, line0.HoldingMore, tc.tasks-wantMore, wantMore)
				}
				if wantMore == 0 && !maps.EqualFunc(line0.Holding, want, slices.Equal) {
					t.Fatalf("Holding %v, want %v", line0.Holding, want)
				}
				if tc.shards > 0 && !slices.Equal(line0.Queues, queueNames(queues)) {
					t.Fatalf("line queues %v, want the shards %v", line0.Queues, queueNames(queues))
				}
				ws, err := ListWorkers(ctx, b.Client, b.Prefix)
				if err != nil {
					t.Fatal(err)
				}
				for q, ids := range line0.Holding {
					if w, ok := Holder(ws, q, ids[0]); !ok || w.ID != "hold-pool" {
						t.Errorf("Holder(%s, %s) = %q, %v", q, ids[0], w.ID, ok)
					}
					if _, ok := Holder(ws, q+"-other", ids[0]); ok {
						t.Errorf("Holder found %s under another queue's name", ids[0])
					}
				}
				unblock()
				waitFor(t, 10*time.Second, "a beat listing no task", func() bool {
					ws, err := ListWorkers(ctx, b.Client, b.Prefix)
					return err == nil && len(ws) == 1 && len(ws[0].Lines) == 1 &&
						ws[0].Lines[0].Holding == nil && ws[0].Lines[0].HoldingMore == 0 && ws[0].Running == 0
				})
				_ = stop()
			})
		})
	}
}

func queueNames(qs []*Queue) []string {
	out := make([]string, len(qs))
	for i, q := range qs {
		out[i] = q.Name()
	}
	return out
}

// An entry written by a pool older than the holding lists (none in its
// lines) still reads, and Holder finds no pool for any task.
func TestRegistryHoldingOldEntry(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		live, info := registryKeys(b.Prefix)
		old := `{"id":"old-pool","host":"h","pid":7,"mode":"weighted","concurrency":2,"running":1,` +
			`"lines":[{"name":"orders","queues":["orders"],"weight":1,"running":1}],` +
			`"started":"2025-01-01T00:00:00Z","interval":"5s","version":"v0.2.0","release":1}`
		now, err := b.Client.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Client.Set(ctx, info+"old-pool", old, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if err := b.Client.ZAdd(ctx, live, redis.Z{Score: float64(now.UnixMilli()), Member: "old-pool"}).Err(); err != nil {
			t.Fatal(err)
		}
		ws, err := ListWorkers(ctx, b.Client, b.Prefix)
		if err != nil || len(ws) != 1 {
			t.Fatalf("ListWorkers: %v %+v", err, ws)
		}
		w := ws[0]
		if w.ID != "old-pool" || w.Running != 1 || len(w.Lines) != 1 || w.Lines[0].Holding != nil ||
			w.Lines[0].HoldingMore != 0 || !w.Serves("orders") {
			t.Fatalf("read %+v", w)
		}
		if _, ok := Holder(ws, "orders", "any"); ok {
			t.Fatal("Holder found a task in an entry that lists none")
		}
		// of two entries listing one task, the later beat's names it
		at := time.Unix(1000, 0)
		two := []WorkerInfo{
			{ID: "later", Beat: at.Add(time.Second), Lines: []LineInfo{{Holding: map[string][]string{"orders": {"7"}}}}},
			{ID: "earlier", Beat: at, Lines: []LineInfo{{Holding: map[string][]string{"orders": {"7"}}}}},
		}
		if w, ok := Holder(two, "orders", "7"); !ok || w.ID != "later" {
			t.Fatalf("Holder of a task two entries list: %q %v, want the later beat's", w.ID, ok)
		}
		// and what this code writes reads back the same
		b2, err := json.Marshal(workerEntry{WorkerInfo: WorkerInfo{Lines: []LineInfo{{Name: "l",
			Holding: map[string][]string{"l": {"a", "b"}}, HoldingMore: 3}}}})
		if err != nil {
			t.Fatal(err)
		}
		var e workerEntry
		if err := json.Unmarshal(b2, &e); err != nil || !slices.Equal(e.Lines[0].Holding["l"], []string{"a", "b"}) ||
			e.Lines[0].HoldingMore != 3 {
			t.Fatalf("round trip of %s: %v %+v", b2, err, e.Lines)
		}
	})
}

// capHolding keeps the first limit (queue, ID) pairs, sorted, and counts
// the rest.
func TestCapHolding(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		in    map[string][]string
		limit int
		want  map[string][]string
		more  int
	}{
		{"under", map[string][]string{"a": {"2", "1"}}, 2, map[string][]string{"a": {"1", "2"}}, 0},
		{"one queue", map[string][]string{"a": {"3", "1", "2"}}, 2, map[string][]string{"a": {"1", "2"}}, 1},
		{"two queues", map[string][]string{"b": {"1"}, "a": {"9", "8"}}, 2, map[string][]string{"a": {"8", "9"}}, 1},
		{"split", map[string][]string{"b": {"1", "2"}, "a": {"9"}}, 2, map[string][]string{"a": {"9"}, "b": {"1"}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := LineInfo{Holding: tc.in}
			capHolding(&l, tc.limit)
			if !maps.EqualFunc(l.Holding, tc.want, slices.Equal) || l.HoldingMore != tc.more {
				t.Fatalf("got %v +%d, want %v +%d", l.Holding, l.HoldingMore, tc.want, tc.more)
			}
		})
	}
}
