package delay

import (
	"context"
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
				q := namedQ(t, b, "adv-lease", Options{Lease: 300 * time.Millisecond})
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
				// the lease ended at task.Deadline (Redis clock): a beat after
				// that must not list the task
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
					return newest.After(over.Add(advBeat))
				})
				if id, _ := holderOf(t, ctx, b, q.Name(), task.ID); id != "" {
					t.Fatalf("after the lease ended, Holder names %q", id)
				}
			})
		})
	}
}
