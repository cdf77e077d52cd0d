package main_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delayraw"
	"github.com/tierset/tierset/internal/delaytest"
	"github.com/tierset/tierset/internal/opsview"
)

// TestQueueTasksInflightWorker: queue tasks -state inflight (text and
// -json) and queue task name the pool whose heartbeat lists a task, and
// say "not in a heartbeat yet" of one no live entry lists (taken by hand
// here); once the handlers return, a later beat lists none.
func TestQueueTasksInflightWorker(t *testing.T) {
	t.Parallel()
	host, err := os.Hostname()
	if err != nil {
		t.Skipf("no hostname to expect in the entry: %v", err)
	}
	eachServer(t, func(t *testing.T, s *server) {
		ctx := t.Context()
		q, err := delay.New(s.client, "orders", delay.Options{Prefix: s.prefix})
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"a", "b", "c"} {
			if _, err := q.Enqueue(ctx, delay.Job{Key: key}); err != nil {
				t.Fatal(err)
			}
		}
		held, release := delaytest.HoldTasks(t, ctx, q, 3, "cli-pool")
		if _, err := q.Enqueue(ctx, delay.Job{Key: "by-hand"}); err != nil {
			t.Fatal(err)
		}
		b, err := delayraw.Take(ctx, q, 1)
		if err != nil || len(b) != 1 {
			t.Fatalf("take: %v, %d tasks", err, len(b))
		}
		byHand := b[0].ID

		r := tierset(t, s.args("queue", "tasks", "-queue", "orders", "-state", "inflight")...)
		r.expect(t, 0)
		lines := strings.Split(r.stdout, "\n")
		if !strings.HasPrefix(r.stdout, "queue orders: 4 tasks in flight\n") || !strings.Contains(lines[1], "WORKER") ||
			!strings.Contains(r.stdout, opsview.NotListed+": "+opsview.NotListedWhy+"\n") {
			t.Fatalf("queue tasks -state inflight:\n%s", r.stdout)
		}
		for _, l := range lines[2:6] {
			id := strings.Fields(l)[0]
			want := "cli-pool (" + host + ")"
			if id == byHand {
				want = opsview.NotListed
			}
			if !strings.Contains(l, want) {
				t.Errorf("row of %s: %q, want %q", id, l, want)
			}
		}

		r = tierset(t, s.args("queue", "tasks", "-queue", "orders", "-state", "inflight", "-json")...)
		r.expect(t, 0)
		var pg opsview.Page
		if err := json.Unmarshal([]byte(r.stdout), &pg); err != nil || len(pg.Tasks) != 4 {
			t.Fatalf("-json: %v\n%s", err, r.stdout)
		}
		for _, v := range pg.Tasks {
			want := opsview.Task{Worker: "cli-pool", WorkerHost: host}
			if v.ID == byHand {
				want = opsview.Task{}
			}
			if v.Worker != want.Worker || v.WorkerHost != want.WorkerHost {
				t.Errorf("-json task %s: worker %q on %q, want %q on %q", v.ID, v.Worker, v.WorkerHost, want.Worker, want.WorkerHost)
			}
		}
		if strings.Count(r.stdout, `"worker":`) != 3 || strings.Count(r.stdout, `"worker_host":`) != 3 {
			t.Errorf("-json: want worker and worker_host on the 3 listed tasks only:\n%s", r.stdout)
		}

		for _, tc := range []struct{ id, want string }{
			{held[0], "worker      cli-pool (" + host + ")\n"},
			{byHand, "worker      " + opsview.NotListed + "\n"},
		} {
			r = tierset(t, s.args("queue", "task", "-queue", "orders", "-id", tc.id)...)
			r.expect(t, 0)
			if !strings.Contains(r.stdout, tc.want) {
				t.Errorf("queue task %s: want %q in\n%s", tc.id, tc.want, r.stdout)
			}
		}

		release()
		r = tierset(t, s.args("queue", "tasks", "-queue", "orders", "-state", "inflight", "-json")...)
		r.expect(t, 0)
		pg = opsview.Page{} // Unmarshal would keep the earlier tasks' fields
		if err := json.Unmarshal([]byte(r.stdout), &pg); err != nil || len(pg.Tasks) != 1 || pg.Tasks[0].ID != byHand ||
			pg.Tasks[0].Worker != "" {
			t.Fatalf("after the handlers returned: %v\n%s", err, r.stdout)
		}
	})
}
