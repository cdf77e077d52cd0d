package delay

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

// advBeat is the heartbeat of these tests: short, so a test waits a few
// beats, and every poll's deadline is many of them.
const advBeat = 50 * time.Millisecond

// holderOf lists the workers of b and returns the ID of Holder's pool for
// (queue, id), "" when none lists it, and the newest beat seen.
func holderOf(t *testing.T, ctx context.Context, b *testredis.Backend, queue, id string) (string, time.Time) {
	t.Helper()
	ws, err := ListWorkers(ctx, b.Client, b.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	var newest time.Time
	for _, w := range ws {
		if w.Beat.After(newest) {
			newest = w.Beat
		}
	}
	w, ok := Holder(ws, queue, id)
	if !ok {
		return "", newest
	}
	return w.ID, newest
}

// A pool whose handler overruns its task's lease (no AutoExtend) holds the
// task no longer: another consumer may take it. Its entry must stop
// listing the task within a beat of the lease's end, or Holder names the
// old pool for as long as the handler runs (alternating with the new
// holder, whichever beat last). And a queue of the same name under
// another prefix never names this pool.
func TestFaultRegistryHoldingLeaseEnded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		takeover bool // another consumer takes the task after its lease
	}{
		{"lease ended", false},
		{"taken by another", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
				q := namedQ(t, b, "adv-lease", Options{Lease: time.Second})
				fillDue(t, ctx, q, 1)
				started := make(chan *Task, 1)
				release := make(chan struct{})
				unblock := sync.OnceFunc(func() { close(release) })
				t.Cleanup(unblock)
				p, err := NewPool(PoolOptions{Concurrency: 1, Heartbeat: advBeat, ID: "adv-old"})
				if err != nil {
					t.Fatal(err)
				}
				if err := p.Add(q, func(ctx context.Context, task *Task) error {
					started <- task
					<-release
					return nil
				}, QueueOptions{}); err != nil {
					t.Fatal(err)
				}
				stop := runFunc(t, p.Run)
				t.Cleanup(func() { unblock(); _ = stop() })
				var task *Task
				select {
				case task = <-started:
				case <-time.After(10 * time.Second):
					t.Fatal("no handler started")
				}
				waitFor(t, 5*time.Second, "a beat listing the task", func() bool {
					id, _ := holderOf(t, ctx, b, q.Name(), task.ID)
					return id == "adv-old"
				})
				// same name, other prefix: never this pool's
				other := b.Prefix + "-other"
				ws, err := ListWorkers(ctx, b.Client, other)
				if err != nil {
					t.Fatal(err)
				}
				if w, ok := Holder(ws, q.Name(), task.ID); ok {
					t.Fatalf("prefix %s names %s for a task of %s", other, w.ID, b.Prefix)
				}
				if tc.takeover {
					waitFor(t, 5*time.Second, "the task taken again after its lease", func() bool {
						if _, err := q.Sweep(ctx, 1); err != nil {
							t.Fatal(err)
						}
						tb, err := q.takeN(ctx, 1)
						if err != nil {
							t.Fatal(err)
						}
						return len(tb.Tasks) == 1 && tb.Tasks[0].ID == task.ID
					})
				}
				// the lease ended at task.Deadline (Redis clock): a beat written
				// 3 intervals after that (its snapshot taken after the end
				// whatever the write's delay) must not list the task
				var over time.Time
				waitFor(t, 5*time.Second, "the lease's end on the server's clock", func() bool {
					now, err := b.Client.Time(ctx).Result()
					if err != nil {
						t.Fatal(err)
					}
					over = now
					return now.After(task.Deadline)
				})
				waitFor(t, 5*time.Second, "a beat after the lease's end", func() bool {
					_, newest := holderOf(t, ctx, b, q.Name(), task.ID)
					return newest.After(over.Add(3 * advBeat))
				})
				if id, _ := holderOf(t, ctx, b, q.Name(), task.ID); id != "" {
					t.Fatalf("after the lease ended, Holder names %q", id)
				}
			})
		})
	}
}

// The heartbeat reads each line's running set while handlers start and
// finish (many short tasks, a 10 ms beat, several lines): under -race a
// data race fails the test; every ID a beat lists is a task of the queue
// it is listed under, and once all are handled a beat lists none.
func TestRegistryHoldingChurn(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		const lines, perLine = 3, 200
		p, err := NewPool(PoolOptions{Concurrency: 8, Heartbeat: MinHeartbeat, ID: "adv-churn"})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		enqueued := map[string]bool{} // queue/ID
		handled := 0
		for i := range lines {
			q := namedQ(t, b, "adv-churn-"+string(rune('a'+i)), Options{})
			for _, e := range mustEnqueueBatch(t, ctx, q, jobsOf(perLine, func(i int) Job { return Job{Key: fmt.Sprintf("k%d", i)} })) {
				enqueued[q.Name()+"/"+e.ID] = true
			}
			if err := p.Add(q, func(ctx context.Context, task *Task) error {
				mu.Lock()
				handled++
				mu.Unlock()
				return nil
			}, QueueOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		stop := runFunc(t, p.Run)
		t.Cleanup(func() { _ = stop() })
		beats := 0
		check := func() (ws []WorkerInfo) {
			ws, err := ListWorkers(ctx, b.Client, b.Prefix)
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, w := range ws {
				for _, l := range w.Lines {
					for q, ids := range l.Holding {
						for _, id := range ids {
							if !enqueued[q+"/"+id] {
								t.Fatalf("beat lists %s/%s, not a task of that queue", q, id)
							}
						}
					}
				}
			}
			return ws
		}
		waitFor(t, 20*time.Second, "every task handled", func() bool {
			if len(check()) == 1 {
				beats++
			}
			mu.Lock()
			defer mu.Unlock()
			return handled == lines*perLine
		})
		waitFor(t, 5*time.Second, "a beat listing no task", func() bool {
			ws := check()
			if len(ws) != 1 || ws[0].Running != 0 {
				return false
			}
			for _, l := range ws[0].Lines {
				if l.Holding != nil || l.HoldingMore != 0 {
					return false
				}
			}
			return true
		})
		if beats == 0 {
			t.Fatal("no entry read while the tasks ran")
		}
	})
}

// The cap at its edge: exactly MaxHoldingListed IDs are all listed with
// nothing counted; one more, split over two queues, drops the last
// (queue, ID) pair in sort order and counts it.
func TestCapHoldingEdge(t *testing.T) {
	t.Parallel()
	ids := func(q string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s-%04d", q, i)
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		a, b     int // IDs in queues "a" and "b"
		wantB    int // of b's kept
		wantMore int
	}{
		{"at the cap", MaxHoldingListed, 0, 0, 0},
		{"split at the cap", MaxHoldingListed - 1, 1, 1, 0},
		{"one over", MaxHoldingListed, 1, 0, 1},
		{"one over split", MaxHoldingListed - 1, 2, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := LineInfo{Holding: map[string][]string{"a": ids("a", tc.a)}}
			if tc.b > 0 {
				l.Holding["b"] = ids("b", tc.b)
			}
			capHolding(&l, MaxHoldingListed)
			if len(l.Holding["a"]) != tc.a || len(l.Holding["b"]) != tc.wantB || l.HoldingMore != tc.wantMore {
				t.Fatalf("kept a %d, b %d, more %d; want %d, %d, %d",
					len(l.Holding["a"]), len(l.Holding["b"]), l.HoldingMore, tc.a, tc.wantB, tc.wantMore)
			}
			if _, ok := l.Holding["b"]; ok != (tc.wantB > 0) {
				t.Fatalf("queue b present %v with %d kept", ok, tc.wantB)
			}
		})
	}
}
