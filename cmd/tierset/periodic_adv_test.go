package main_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/periodic"
)

// list without -queue ("default every queue") finds a periodic job on a
// queue that holds no task (its ticks are in the future, or acked), and
// the job names at the limits (MaxNameBytes, multi-byte UTF-8) go
// through pause and resume.
func TestPeriodicListQueueWithoutTasks(t *testing.T) {
	eachServer(t, func(t *testing.T, s *server) {
		ctx := context.Background()
		q, err := delay.New(s.client, "jobs", delay.Options{Prefix: s.prefix})
		if err != nil {
			t.Fatal(err)
		}
		runJob(t, q, "proc-1") // "report", every hour: no task yet
		if infos, err := q.List(ctx, delay.ListOptions{Key: "report"}); err != nil || len(infos.Tasks) != 0 {
			t.Fatalf("want a queue with no task: %+v %v", infos, err)
		}
		r := tierset(t, s.args("periodic", "list", "-json")...)
		r.expect(t, 0)
		var jobs []map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &jobs); err != nil {
			t.Fatalf("list -json: %v\n%s", err, r.stdout)
		}
		if len(jobs) != 1 || jobs[0]["queue"] != "jobs" || jobs[0]["name"] != "report" {
			t.Fatalf("list without -queue on a queue with no task: %s", r.stdout)
		}
		if got, err := periodic.List(ctx, q); err != nil || len(got) != 1 {
			t.Fatalf("periodic.List: %+v %v", got, err)
		}
		for _, sub := range []string{"pause", "resume"} {
			long := strings.Repeat("é", periodic.MaxNameBytes/2)
			r = tierset(t, s.args("periodic", sub, "-queue", "jobs", "-job", long)...)
			r.expect(t, 1) // a valid name never declared: not found, not a usage error
			if !strings.Contains(r.stderr, "no periodic job") {
				t.Errorf("%s of an undeclared name of MaxNameBytes: %s", sub, r.stderr)
			}
		}
	})
}
