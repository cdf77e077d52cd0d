package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delayraw"
	"github.com/tierset/tierset/internal/delaytest"
	"github.com/tierset/tierset/internal/opsview"
	"github.com/tierset/tierset/internal/text"
)

// deadLetters makes n dead letters in queue "orders" (IDs 1 to n in base
// 36, so past 9 they hold letters) and one task due in a day.
func deadLetters(t *testing.T, s *server, n int) *delay.Queue {
	t.Helper()
	ctx := t.Context()
	q, err := delay.New(s.client, "orders", delay.Options{Prefix: s.prefix})
	if err != nil {
		t.Fatal(err)
	}
	jobs := make([]delay.Job, n)
	for i := range jobs {
		jobs[i] = delay.Job{Key: fmt.Sprintf("order-%d", i), Payload: []byte(`{"order":1}`), When: delay.After(0)}
	}
	if _, err := q.EnqueueBatch(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	b, err := delayraw.Take(ctx, q, n)
	if err != nil || len(b) != n {
		t.Fatalf("take: %d tasks, %v", len(b), err)
	}
	for _, tk := range b {
		if _, err := delayraw.Kill(ctx, q, tk, errors.New("payment service said 503")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Enqueue(ctx, delay.Job{Key: "later", When: delay.After(24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	return q
}

// idColumn reads the ID column of a listing's table (the lines after the
// header line that starts with "ID").
func idColumn(t *testing.T, listing string) []string {
	t.Helper()
	var ids []string
	header := false
	for _, l := range strings.Split(strings.TrimSpace(listing), "\n") {
		if strings.HasPrefix(l, "ID ") {
			header = true
			continue
		}
		if header {
			ids = append(ids, strings.Fields(l)[0])
		}
	}
	if !header {
		t.Fatalf("no table in:\n%s", listing)
	}
	return ids
}

// Every ID, state name and duration the CLI prints is accepted back: the
// text listing's IDs by requeue, the JSON listing's by purge, each state
// a task shows by -state, each duration by reschedule -in.
func TestListingFedBack(t *testing.T) {
	t.Parallel()
	eachServer(t, func(t *testing.T, s *server) {
		const n = 40
		q := deadLetters(t, s, n)
		qargs := func(sub string, extra ...string) []string {
			return s.args(append([]string{"queue", sub, "-queue", "orders"}, extra...)...)
		}
		deadCount := func() int64 {
			t.Helper()
			st, err := q.Stats(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			return st.Dead
		}

		r := tierset(t, qargs("dead", "-limit", "100")...)
		r.expect(t, 0)
		ids := idColumn(t, r.stdout)
		if len(ids) != n || !slices.ContainsFunc(ids, func(id string) bool { return strings.ContainsAny(id, "abcdefghijklmnopqrstuvwxyz") }) {
			t.Fatalf("dead listing IDs %v: want %d, some with letters", ids, n)
		}
		r = tierset(t, qargs("requeue", "-yes", "-ids", strings.Join(ids[:n/2], ","))...)
		r.expect(t, 0)
		if got := deadCount(); got != n/2 {
			t.Fatalf("after requeue of the text listing's first %d IDs: %d dead, want %d", n/2, got, n/2)
		}

		r = tierset(t, qargs("dead", "-json", "-limit", "100")...)
		r.expect(t, 0)
		var page opsview.Page
		if err := json.Unmarshal([]byte(r.stdout), &page); err != nil {
			t.Fatalf("dead -json: %v\n%s", err, r.stdout)
		}
		if page.Total != n/2 || len(page.Tasks) != n/2 || page.State != "dead" || page.Queue != "orders" {
			t.Fatalf("dead -json: total %d, %d tasks, state %q, queue %q", page.Total, len(page.Tasks), page.State, page.Queue)
		}
		var jsonIDs []string
		for _, tk := range page.Tasks {
			if slices.Contains(ids[:n/2], tk.ID) || tk.LastError != "payment service said 503" {
				t.Errorf("dead -json lists %+v", tk)
			}
			jsonIDs = append(jsonIDs, tk.ID)
		}
		r = tierset(t, qargs("purge", "-yes", "-ids", strings.Join(jsonIDs, ","))...)
		r.expect(t, 0)
		if got := deadCount(); got != 0 {
			t.Fatalf("after purge of the JSON listing's IDs: %d dead", got)
		}

		// Each state a listed task shows is a -state the listing takes.
		r = tierset(t, qargs("tasks", "-json", "-state", "pending", "-limit", "100")...)
		r.expect(t, 0)
		if err := json.Unmarshal([]byte(r.stdout), &page); err != nil {
			t.Fatal(err)
		}
		states := map[string]int{}
		for _, tk := range page.Tasks {
			states[tk.State]++
		}
		if states["due"] != n/2 || states["scheduled"] != 1 {
			t.Fatalf("pending -json states %v, want %d due and 1 scheduled", states, n/2)
		}
		for st, c := range states {
			r = tierset(t, qargs("tasks", "-json", "-state", st, "-limit", "100")...)
			r.expect(t, 0)
			var p opsview.Page
			if err := json.Unmarshal([]byte(r.stdout), &p); err != nil || len(p.Tasks) != c {
				t.Errorf("-state %s: %d tasks, want %d (%v)", st, len(p.Tasks), c, err)
			}
		}

		// A duration as the CLI prints it is a delay reschedule takes.
		r = tierset(t, qargs("stats", "-json")...)
		r.expect(t, 0)
		var qv opsview.Queue
		if err := json.Unmarshal([]byte(r.stdout), &qv); err != nil {
			t.Fatal(err)
		}
		if qv.Ready != n/2 || qv.Scheduled != 1 || qv.Dead != 0 || qv.Name != "orders" {
			t.Errorf("stats -json: %+v", qv)
		}
		for _, d := range []string{qv.OldestDueAge, text.Duration(60748*3600e9 + 1), "2d4h"} {
			r = tierset(t, qargs("reschedule", "-key", "later", "-in", d)...)
			r.expect(t, 0)
		}
		ctx := context.WithoutCancel(t.Context())
		p, err := q.List(ctx, delay.ListOptions{Key: "later"})
		if err != nil || len(p.Tasks) != 1 || p.Tasks[0].State != delay.StateScheduled {
			t.Errorf("after reschedule -in 2d4h: %+v, %v", p.Tasks, err)
		}
	})
}

// queue task -payload prints the payload; -json carries it as JSON, or
// as base64 when it is not JSON.
func TestQueueTaskPayload(t *testing.T) {
	t.Parallel()
	eachServer(t, func(t *testing.T, s *server) {
		q, err := delay.New(s.client, "orders", delay.Options{Prefix: s.prefix})
		if err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			payload  string
			text     string
			jsonPart string
		}{
			{`{"order":7}`, `{"order":7}`, `"payload": {` + "\n"},
			{"raw\x1b[2J", `raw\x1b[2J`, `"payload_base64": "cmF3G1sySg=="`},
		}
		for i, tc := range cases {
			e, err := q.Enqueue(t.Context(), delay.Job{Key: fmt.Sprintf("order-%d", i), Payload: []byte(tc.payload), When: delay.After(24 * time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			r := tierset(t, s.args("queue", "task", "-queue", "orders", "-id", e.ID, "-payload")...)
			r.expect(t, 0)
			if !strings.Contains(r.stdout, tc.text+"\n") {
				t.Errorf("task -payload lacks %q:\n%s", tc.text, r.stdout)
			}
			r = tierset(t, s.args("queue", "task", "-queue", "orders", "-id", e.ID, "-json")...)
			r.expect(t, 0)
			if !strings.Contains(r.stdout, tc.jsonPart) || !strings.Contains(r.stdout, `"state": "scheduled"`) {
				t.Errorf("task -json lacks %q:\n%s", tc.jsonPart, r.stdout)
			}
		}
	})
}

// queue workers lists the live pools from their heartbeats, in text and
// JSON, all of them or those serving -queue.
func TestQueueWorkers(t *testing.T) {
	t.Parallel()
	eachServer(t, func(t *testing.T, s *server) {
		ctx := t.Context()
		q, err := delay.New(s.client, "orders", delay.Options{Prefix: s.prefix})
		if err != nil {
			t.Fatal(err)
		}
		other, err := delay.New(s.client, "mail", delay.Options{Prefix: s.prefix})
		if err != nil {
			t.Fatal(err)
		}
		for _, qq := range []*delay.Queue{q, other} { // a queue is found by its keys
			if _, err := qq.Enqueue(ctx, delay.Job{Key: "later", When: delay.After(24 * time.Hour)}); err != nil {
				t.Fatal(err)
			}
		}
		delaytest.StartWorker(t, ctx, q, func(context.Context, *delay.Task) error { return nil },
			delay.PoolOptions{ID: "pool-a", Concurrency: 3, Heartbeat: time.Second})
		deadline := time.Now().Add(10 * time.Second)
		for {
			ws, err := delay.ListWorkers(ctx, s.client, s.prefix)
			if err != nil {
				t.Fatal(err)
			}
			if len(ws) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the pool did not register within 10s: %+v", ws)
			}
			time.Sleep(20 * time.Millisecond)
		}
		r := tierset(t, s.args("queue", "workers")...)
		r.expect(t, 0)
		if !strings.Contains(r.stdout, "pool-a ") || !strings.Contains(r.stdout, " 0/3 ") || !strings.Contains(r.stdout, "1 live worker pool\n") {
			t.Errorf("queue workers:\n%s", r.stdout)
		}
		cases := []struct {
			queue string
			want  int
		}{{"orders", 1}, {"mail", 0}, {"", 1}}
		for _, tc := range cases {
			args := []string{"queue", "workers", "-json"}
			if tc.queue != "" {
				args = append(args, "-queue", tc.queue)
			}
			r = tierset(t, s.args(args...)...)
			r.expect(t, 0)
			var ws []opsview.Worker
			if err := json.Unmarshal([]byte(r.stdout), &ws); err != nil || len(ws) != tc.want {
				t.Fatalf("workers -json -queue %q: %v, %d pools, want %d\n%s", tc.queue, err, len(ws), tc.want, r.stdout)
			}
			if tc.want == 1 && (ws[0].ID != "pool-a" || ws[0].Concurrency != 3 || ws[0].Interval != "1s" || ws[0].Lines[0].Name != "orders") {
				t.Errorf("workers -json: %+v", ws[0])
			}
		}
		r = tierset(t, s.args("queue", "workers", "-queue", "nosuch")...)
		r.expect(t, 1)
	})
}
