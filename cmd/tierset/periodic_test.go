package main_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/periodic"
)

// runJob runs a scheduler declaring the job "report" on the queue "jobs"
// as process proc until the returned stop is called, after List shows
// its declaration.
func runJob(t *testing.T, q *delay.Queue, proc string) (stop func()) {
	t.Helper()
	s, err := periodic.New(q, periodic.Options{Process: proc, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add(periodic.Job{Name: "report", Schedule: periodic.Every(time.Hour), CatchUp: periodic.CatchUpSkip}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Run(ctx) })
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	deadline := time.Now().Add(10 * time.Second)
	for {
		jobs, err := periodic.List(context.Background(), q)
		if err == nil && len(jobs) == 1 && len(jobs[0].Definitions) == 1 {
			return stop
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scheduler did not declare within 10 s: %+v %v", jobs, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tierset periodic: list (table and -json) shows the job with its
// process; pause and resume change it for every process; forget refuses
// while the process declares it, then deletes it; unknown jobs and bad
// flags are errors.
func TestPeriodicCommands(t *testing.T) {
	eachServer(t, func(t *testing.T, s *server) {
		ctx := context.Background()
		q, err := delay.New(s.client, "jobs", delay.Options{Prefix: s.prefix})
		if err != nil {
			t.Fatal(err)
		}
		// a task, so that list without -queue discovers the queue
		if _, err := q.Enqueue(ctx, delay.Job{Key: "other", Payload: []byte("x"), When: delay.After(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		stop := runJob(t, q, "proc-1")
		pargs := func(sub string, extra ...string) []string {
			return s.args(append([]string{"periodic", sub}, extra...)...)
		}
		r := tierset(t, pargs("list")...)
		r.expect(t, 0)
		for _, want := range []string{"QUEUE", "jobs", "report", "every 1h0m0s", "skip", "running",
			"  jobs/report: proc-1 declared 20", "1 periodic job\n"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("list lacks %q:\n%s", want, r.stdout)
			}
		}
		r = tierset(t, pargs("pause", "-queue", "jobs", "-job", "report")...)
		r.expect(t, 0)
		if !strings.Contains(r.stdout, "periodic job jobs/report: paused") {
			t.Errorf("pause: %q", r.stdout)
		}
		r = tierset(t, pargs("list", "-queue", "jobs", "-json")...)
		r.expect(t, 0)
		var jobs []map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &jobs); err != nil || len(jobs) != 1 {
			t.Fatalf("list -json: %v\n%s", err, r.stdout)
		}
		j := jobs[0]
		defs, _ := j["definitions"].([]any)
		if j["queue"] != "jobs" || j["name"] != "report" || j["spec"] != "every 1h0m0s" || j["catch_up"] != "skip" ||
			j["paused"] != true || j["paused_since"] == nil || len(defs) != 1 {
			t.Fatalf("list -json: %s", r.stdout)
		}
		procs, _ := defs[0].(map[string]any)["processes"].([]any)
		if len(procs) != 1 || procs[0].(map[string]any)["process"] != "proc-1" || procs[0].(map[string]any)["declared"] == nil {
			t.Fatalf("list -json processes: %s", r.stdout)
		}
		if got, err := periodic.List(ctx, q); err != nil || !got[0].Paused {
			t.Fatalf("after pause: %+v %v", got, err)
		}
		r = tierset(t, pargs("resume", "-queue", "jobs", "-job", "report")...)
		r.expect(t, 0)
		if got, err := periodic.List(ctx, q); err != nil || got[0].Paused {
			t.Fatalf("after resume: %+v %v", got, err)
		}
		r = tierset(t, pargs("forget", "-queue", "jobs", "-job", "report")...)
		r.expect(t, 1)
		if !strings.Contains(r.stderr, "declared by a live process") || !strings.Contains(r.stderr, "proc-1") {
			t.Errorf("forget while declared: %s", r.stderr)
		}
		stop()
		r = tierset(t, pargs("forget", "-queue", "jobs", "-job", "report")...)
		r.expect(t, 0)
		if got, err := periodic.List(ctx, q); err != nil || len(got) != 0 {
			t.Fatalf("after forget: %+v %v", got, err)
		}
		for _, sub := range []string{"pause", "resume", "forget"} {
			r = tierset(t, pargs(sub, "-queue", "jobs", "-job", "report")...)
			r.expect(t, 1)
			if !strings.Contains(r.stderr, `no periodic job "report" on queue "jobs"`) {
				t.Errorf("%s of a forgotten job: %s", sub, r.stderr)
			}
		}
		r = tierset(t, pargs("list", "-queue", "jobs")...)
		r.expect(t, 0)
		if r.stdout != "no periodic job on 1 queue\n" {
			t.Errorf("list with no job: %q", r.stdout)
		}
	})
}

// Bad flags are usage errors (exit 2), found before Redis is reached.
func TestPeriodicUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"periodic"}, "want a subcommand: list, pause, resume, forget"},
		{[]string{"periodic", "stop"}, "unknown periodic subcommand"},
		{[]string{"periodic", "pause", "-job", "j"}, "pause needs -queue"},
		{[]string{"periodic", "resume", "-queue", "q"}, "resume needs -job"},
		{[]string{"periodic", "forget", "-queue", "q", "-job", "a b"}, "invalid job name"},
		{[]string{"periodic", "pause", "-queue", "q", "-job", strings.Repeat("j", periodic.MaxNameBytes+1)}, "invalid job name"},
		{[]string{"periodic", "pause", "-queue", "q", "-job", "j", "-json"}, "pause does not take -json"},
		{[]string{"periodic", "list", "-job", "j"}, "list does not take -job"},
		{[]string{"periodic", "list", "-queue", "a{b"}, "invalid queue name"},
		{[]string{"periodic", "list"}, "-redis (or $TIERSET_REDIS_URL) is required"},
	} {
		r := tierset(t, tc.args...)
		r.expect(t, 2)
		if !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: stderr %q, want %q", tc.args, r.stderr, tc.want)
		}
	}
}
