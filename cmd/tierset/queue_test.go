package main_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delayraw"
)

// deadQueue makes a queue under the server's prefix holding two pending
// tasks and one dead letter.
func deadQueue(t *testing.T, s *server) (*delay.Queue, string) {
	t.Helper()
	ctx := context.Background()
	q, err := delay.New(s.client, "orders", delay.Options{Prefix: s.prefix})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"order-1", "order-2", "order-3"} {
		if _, err := q.Enqueue(ctx, delay.Job{Key: key, Payload: []byte("expire reservation"), When: delay.After(0)}); err != nil {
			t.Fatal(err)
		}
	}
	b, err := delayraw.Take(ctx, q, 1)
	if err != nil || len(b) != 1 {
		t.Fatalf("take: %v, %d tasks", err, len(b))
	}
	if _, err := delayraw.Kill(ctx, q, b[0], errors.New("payment service said 503")); err != nil {
		t.Fatal(err)
	}
	return q, b[0].ID
}

func TestQueueCommands(t *testing.T) {
	eachServer(t, func(t *testing.T, s *server) {
		q, deadID := deadQueue(t, s)
		ctx := context.Background()
		qargs := func(sub string, extra ...string) []string {
			return s.args(append([]string{"queue", sub, "-queue", "orders"}, extra...)...)
		}
		r := tierset(t, qargs("stats")...)
		r.expect(t, 0)
		for _, want := range []string{"queue orders at ", "  depth:    pending 2 (ready 2), in flight 0, dead 1, finished kept (DoneTTL) 0\n", "dead-lettered 1",
			"  lateness (Redis TIME at take - due, 1 deliveries): p50 < "} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("stats lacks %q:\n%s", want, r.stdout)
			}
		}
		r = tierset(t, qargs("dead")...)
		r.expect(t, 0)
		if !strings.Contains(r.stdout, "queue orders: 1 dead letter\nID ") || !strings.Contains(r.stdout, "\n"+deadID+` `) ||
			!strings.Contains(r.stdout, "payment service said 503\n") {
			t.Errorf("dead:\n%s", r.stdout)
		}
		for _, sub := range []string{"requeue", "purge"} {
			r = tierset(t, qargs(sub)...) // stdin is not a terminal
			r.expect(t, 1)
			if !strings.Contains(r.stderr, "refusing without confirmation: stdin is not a terminal (pass -yes to "+sub+")") {
				t.Errorf("%s without -yes: %s", sub, r.stderr)
			}
			if st, err := q.Stats(ctx); err != nil || st.Dead != 1 {
				t.Fatalf("%s without -yes changed the queue: dead %d, %v", sub, st.Dead, err)
			}
		}
		r = tierset(t, qargs("requeue", "-yes")...)
		r.expect(t, 0)
		if r.stdout != "queue orders: requeued 1 dead letter\n" {
			t.Errorf("requeue -yes: %q", r.stdout)
		}
		if st, err := q.Stats(ctx); err != nil || st.Dead != 0 || st.Pending != 3 {
			t.Errorf("after requeue: %+v, %v", st, err)
		}
		// Kill one again, then purge it by id.
		b, err := delayraw.Take(ctx, q, 1)
		if err != nil || len(b) != 1 {
			t.Fatalf("take: %v", err)
		}
		if _, err := delayraw.Kill(ctx, q, b[0], errors.New("bad payload")); err != nil {
			t.Fatal(err)
		}
		r = tierset(t, qargs("purge", "-yes", "-ids", b[0].ID)...)
		r.expect(t, 0)
		if r.stdout != "queue orders: purged 1 dead letter\n" {
			t.Errorf("purge: %q", r.stdout)
		}
		if st, err := q.Stats(ctx); err != nil || st.Dead != 0 || st.Pending != 2 {
			t.Errorf("after purge: %+v, %v", st, err)
		}
	})
	t.Run("usage", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			msg  string
		}{
			{[]string{"queue"}, "want a subcommand: ls, workers, stats, tasks, task, dead, requeue, purge, cancel, reschedule, run, pause, resume"},
			{[]string{"queue", "reschedule", "-queue", "q", "-redis", "127.0.0.1:1", "-key", "k"}, "exactly one of -at TIME or -in DELAY"},
			{[]string{"queue", "cancel", "-queue", "q", "-redis", "127.0.0.1:1"}, "cancel needs -key"},
			{[]string{"queue", "drain", "-queue", "q"}, `unknown queue subcommand "drain"`},
			{[]string{"queue", "stats"}, "-queue is required"},
			{[]string{"queue", "stats", "-queue", "a b"}, `-queue "a b": invalid queue name`},
			{[]string{"queue", "stats", "-queue", "q"}, "-redis (or $TIERSET_REDIS_URL) is required"},
			{[]string{"queue", "requeue", "-queue", "q", "-json"}, "requeue does not take -json"},
			{[]string{"queue", "dead", "-queue", "q", "-state", "due", "-yes"}, "dead does not take -state, -yes"},
			{[]string{"queue", "stats", "-queue", "q", "-payload"}, "stats does not take -payload"},
		} {
			r := tierset(t, tc.args...)
			r.expect(t, 2)
			if !strings.Contains(r.stderr, tc.msg) {
				t.Errorf("%v: stderr %q lacks %q", tc.args, r.stderr, tc.msg)
			}
		}
	})
}

// TestQueueTask: queue task prints one task whole, its earlier errors
// under the last one, newest first and escaped; no -id is a usage error
// and an unknown ID a failure.
func TestQueueTask(t *testing.T) {
	eachServer(t, func(t *testing.T, s *server) {
		ctx := context.Background()
		q, err := delay.New(s.client, "orders", delay.Options{Prefix: s.prefix})
		if err != nil {
			t.Fatal(err)
		}
		e, err := q.Enqueue(ctx, delay.Job{Key: "order-7", Payload: []byte("expire"), When: delay.After(0)})
		if err != nil {
			t.Fatal(err)
		}
		steps := []error{errors.New("stock service\x1b[2J timed out"), nil, errors.New("payment service said 503")}
		for i, cause := range steps {
			b, err := delayraw.Take(ctx, q, 1)
			if err != nil || len(b) != 1 || b[0].ID != e.ID {
				t.Fatalf("take %d: %+v, %v", i, b, err)
			}
			if i < len(steps)-1 {
				_, err = delayraw.RetryAfter(ctx, q, b[0], 0, cause)
			} else {
				_, err = delayraw.Kill(ctx, q, b[0], cause)
			}
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		r := tierset(t, s.args("queue", "task", "-queue", "orders", "-id", e.ID)...)
		r.expect(t, 0)
		for _, want := range []string{
			"queue orders: task " + e.ID + ": dead\n",
			"key             \"order-7\"\n",
			"attempts        3\n",
			"payload         6 bytes\n",
			"last error      payment service said 503\nearlier errors  (no error given)\n                stock service\\x1b[2J timed out\n",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("queue task lacks %q:\n%s", want, r.stdout)
			}
		}
		r = tierset(t, s.args("queue", "task", "-queue", "orders")...)
		r.expect(t, 2)
		r = tierset(t, s.args("queue", "task", "-queue", "orders", "-id", "zzzz")...)
		r.expect(t, 1)
		if !strings.Contains(r.stderr, "not found") {
			t.Errorf("unknown ID: %q", r.stderr)
		}
	})
}
