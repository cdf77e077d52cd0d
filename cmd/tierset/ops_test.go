package main_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/testredis"
)

// TestQueueMistakesFail: an unknown queue or task ID is an error (exit 1)
// that changes nothing, never a quiet zero.
func TestQueueMistakesFail(t *testing.T) {
	t.Parallel()
	eachServer(t, func(t *testing.T, s *server) {
		q, deadID := deadQueue(t, s)
		for _, tc := range []struct {
			args []string
			msg  string
		}{
			{[]string{"queue", "stats", "-queue", "nosuch"}, `no queue "nosuch" under prefix`},
			{[]string{"queue", "dead", "-queue", "nosuch"}, "queues: orders"},
			{[]string{"queue", "requeue", "-queue", "orders", "-yes", "-ids", "1,999,1.5"}, `-ids: "1.5" is not a task ID`},
			{[]string{"queue", "purge", "-queue", "orders", "-yes", "-ids", "!!"}, `-ids: "!!" is not a task ID`},
			{[]string{"queue", "requeue", "-queue", "orders", "-yes", "-ids", deadID + ",999"}, "999 is not a dead letter (nothing changed)"},
			{[]string{"queue", "cancel", "-queue", "orders", "-key", "no-such-key"}, `no task of key "no-such-key"`},
			{[]string{"queue", "run", "-queue", "orders", "-key", "no-such-key"}, `key "no-such-key" has no pending task`},
			{[]string{"queue", "tasks", "-queue", "orders", "-state", "sleeping"}, `-state "sleeping"`},
		} {
			r := tierset(t, s.args(tc.args...)...)
			if r.code == 0 || !strings.Contains(r.stderr, tc.msg) {
				t.Errorf("%v: exit %d, stderr %q; want an error with %q", tc.args, r.code, r.stderr, tc.msg)
			}
		}
		if st, err := q.Stats(t.Context()); err != nil || st.Dead != 1 || st.Pending != 2 {
			t.Errorf("a refused command changed the queue: %+v, %v", st, err)
		}
	})
}

// TestQueueListingsAndKeyCommands: ls and tasks print headers and read
// right; cancel, reschedule and run act on a key's tasks.
func TestQueueListingsAndKeyCommands(t *testing.T) {
	eachServer(t, func(t *testing.T, s *server) {
		q, _ := deadQueue(t, s)
		ctx := t.Context()
		r := tierset(t, s.args("queue", "ls")...)
		r.expect(t, 0)
		if !strings.Contains(r.stdout, "QUEUE") || !strings.Contains(r.stdout, "READY") || !strings.Contains(r.stdout, "orders") ||
			!strings.HasSuffix(r.stdout, "1 queue\n") {
			t.Errorf("queue ls:\n%s", r.stdout)
		}
		r = tierset(t, s.args("queue", "tasks", "-queue", "orders")...)
		r.expect(t, 0)
		if !strings.HasPrefix(r.stdout, "queue orders: 2 tasks pending\nID ") || !strings.Contains(r.stdout, `"order-`) {
			t.Errorf("queue tasks:\n%s", r.stdout)
		}
		r = tierset(t, s.args("queue", "tasks", "-queue", "orders", "-state", "inflight")...)
		r.expect(t, 0)
		if r.stdout != "queue orders: 0 tasks in flight\n" {
			t.Errorf("queue tasks -state inflight: %q", r.stdout)
		}
		if _, err := q.Enqueue(ctx, delay.Job{Key: "later", When: delay.After(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		r = tierset(t, s.args("queue", "reschedule", "-queue", "orders", "-key", "later", "-in", "2h")...)
		r.expect(t, 0)
		if !strings.Contains(r.stdout, `key "later": rescheduled 1 task, due `) {
			t.Errorf("reschedule: %q", r.stdout)
		}
		r = tierset(t, s.args("queue", "run", "-queue", "orders", "-key", "later")...)
		r.expect(t, 0)
		if !strings.Contains(r.stdout, `key "later": made due now 1 task`) {
			t.Errorf("run: %q", r.stdout)
		}
		if ts, err := tasksOf(ctx, q, "later"); err != nil || len(ts) != 1 || time.Until(ts[0].When) > time.Minute {
			t.Errorf("after run: %+v, %v", ts, err)
		}
		r = tierset(t, s.args("queue", "pause", "-queue", "orders")...)
		r.expect(t, 0)
		if st, err := q.Stats(ctx); err != nil || !st.Paused || !strings.Contains(r.stdout, "queue orders: paused") {
			t.Errorf("pause: %q; Stats paused %v, %v", r.stdout, st.Paused, err)
		}
		if r = tierset(t, s.args("queue", "ls")...); !strings.Contains(r.stdout, "paused") {
			t.Errorf("ls after pause:\n%s", r.stdout)
		}
		r = tierset(t, s.args("queue", "resume", "-queue", "orders")...)
		r.expect(t, 0)
		if st, err := q.Stats(ctx); err != nil || st.Paused || !strings.Contains(r.stdout, "queue orders: resumed") {
			t.Errorf("resume: %q; Stats paused %v, %v", r.stdout, st.Paused, err)
		}
		r = tierset(t, s.args("queue", "cancel", "-queue", "orders", "-key", "later")...)
		r.expect(t, 0)
		if !strings.Contains(r.stdout, `key "later": cancelled 1 task pending`) {
			t.Errorf("cancel: %q", r.stdout)
		}
		if ts, err := tasksOf(ctx, q, "later"); err != nil || len(ts) != 0 {
			t.Errorf("after cancel: %+v, %v", ts, err)
		}
	})
}

// TestRedisAddressForms: -redis takes host:port as well as a URL, and a
// server that is not there is one clear line, fast, with no go-redis log.
func TestRedisAddressForms(t *testing.T) {
	eachServer(t, func(t *testing.T, s *server) {
		addr := strings.TrimSuffix(strings.TrimPrefix(s.url, "redis://"), "/0")
		if strings.Contains(addr, "/") || strings.Contains(addr, "@") {
			t.Skip("the server URL has a database or password: host:port cannot name it")
		}
		deadQueue(t, s)
		r := tierset(t, "queue", "stats", "-queue", "orders", "-redis", addr, "-prefix", s.prefix)
		r.expect(t, 0)
	})
	closed := testredis.ClosedAddr(t)
	start := time.Now()
	r := tierset(t, "queue", "ls", "-redis", closed)
	took := time.Since(start)
	r.expect(t, 1)
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "connection refused") || strings.Contains(r.stderr, "pool.go") {
		t.Errorf("unreachable Redis: stderr %q; want one line naming the refusal", r.stderr)
	}
	if took > 3*time.Second {
		t.Errorf("unreachable Redis took %v to report", took)
	}
	r = tierset(t, "queue", "ls", "-redis", "rediss://"+closed)
	if r.code != 1 || !strings.Contains(r.stderr, "connection refused") {
		t.Errorf("rediss:// to a closed port: exit %d, %q", r.code, r.stderr)
	}
}

// TestTLSAgainstPlainServer: rediss:// to a plain server names TLS.
func TestTLSAgainstPlainServer(t *testing.T) {
	t.Parallel()
	eachServer(t, func(t *testing.T, s *server) {
		addr := strings.TrimSuffix(strings.TrimPrefix(s.url, "redis://"), "/0")
		if strings.Contains(addr, "/") || strings.Contains(addr, "@") {
			t.Skip("the server URL has a database or password")
		}
		r := tierset(t, "queue", "ls", "-redis", "rediss://"+addr)
		if r.code != 1 || !strings.Contains(r.stderr, "TLS handshake") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("rediss:// to a plain server: exit %d, stderr %q", r.code, r.stderr)
		}
	})
}

// TestVersionAndAnywhere: version prints; demo and match work from a
// directory that holds no examples/rules.json; a floored amount says so.
func TestVersionAndAnywhere(t *testing.T) {
	t.Parallel()
	run := func(args ...string) result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary, args...)
		cmd.Dir = t.TempDir()
		cmd.Env = childEnv()
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return result{out.String(), errb.String(), code}
	}
	r := run("version")
	r.expect(t, 0)
	if !strings.HasPrefix(r.stdout, "tierset ") || !strings.Contains(r.stdout, "go1.") {
		t.Errorf("version: %q", r.stdout)
	}
	r = run("demo")
	r.expect(t, 0)
	if !strings.Contains(r.stdout, "examples/rules.json (built in)") {
		t.Errorf("demo:\n%s", r.stdout)
	}
	r = run("match", "-promo", "10086", "-value", "99.989", "-at", matchAt)
	r.expect(t, 0)
	if !strings.Contains(r.stdout, "value:    99.98 (floored from 99.989: matching counts whole minor units only)\n") ||
		!strings.Contains(r.stdout, "0.01 more") {
		t.Errorf("match -value 99.989:\n%s", r.stdout)
	}
}

// TestAudit seeds sorted sets with each finding (a float score, equal
// scores, a large member, no TTL) and a damaged tierset promotion, and
// checks audit's JSON report and exit codes.
func TestAudit(t *testing.T) {
	t.Parallel()
	eachServer(t, auditCase)
	t.Run("backend=cluster", func(t *testing.T) {
		b := testredis.Cluster(t) // skips without TIERSET_REDIS_CLUSTER
		auditCase(t, &server{url: strings.Join(testredis.ClusterAddrs(), ","), client: b.Client, prefix: b.Prefix})
	})
}

func auditCase(t *testing.T, s *server) {
	{
		ctx := t.Context()
		p := s.prefix
		r := tierset(t, s.args("warm", "-rules", "examples/rules.json")...)
		r.expect(t, 0)
		if err := s.client.Del(ctx, p+":{p:10086}:tiers").Err(); err != nil {
			t.Fatal(err)
		}
		big := strings.Repeat("x", 2000)
		for _, c := range []struct {
			key string
			zs  []redis.Z
			ttl bool
		}{
			{p + ":money", []redis.Z{{Score: 99.99, Member: "t1"}, {Score: 199, Member: "t2"}}, true},
			{p + ":ties", []redis.Z{{Score: 10, Member: "b"}, {Score: 10, Member: "c"}, {Score: 10, Member: "a"}, {Score: 20, Member: "d"}}, true},
			{p + ":big", []redis.Z{{Score: 1, Member: big}}, true},
			{p + ":forever", []redis.Z{{Score: 1, Member: "x"}}, false},
			{p + ":clean", []redis.Z{{Score: 1, Member: "x"}, {Score: 2, Member: "y"}}, true},
		} {
			if err := s.client.ZAdd(ctx, c.key, c.zs...).Err(); err != nil {
				t.Fatal(err)
			}
			if c.ttl {
				if err := s.client.Expire(ctx, c.key, time.Hour).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
		r = tierset(t, "audit", "-redis", s.url, "-match", p+"*", "-tierset-prefix", p, "-json")
		r.expect(t, 1)
		var rep struct {
			SortedSets int `json:"sorted_sets"`
			Keys       []struct {
				Key        string `json:"key"`
				NonInteger int    `json:"non_integer_scores"`
				Ties       []struct {
					Members []string `json:"members"`
					Wins    string   `json:"wins_today"`
				} `json:"equal_scores"`
				LargeN int  `json:"large_member_count"`
				NoTTL  bool `json:"no_ttl"`
			} `json:"keys"`
			Damaged []string `json:"damaged_promotions"`
			Summary map[string]int
			Took    *int64 `json:"took_ms"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("-json: %v\n%s", err, r.stdout)
		}
		byKey := map[string]int{}
		for i, k := range rep.Keys {
			byKey[strings.TrimPrefix(k.Key, p+":")] = i
		}
		if len(rep.Keys) != 4 || rep.Took == nil {
			t.Fatalf("want 4 keys with findings and took_ms:\n%s", r.stdout)
		}
		if i, ok := byKey["money"]; !ok || rep.Keys[i].NonInteger != 1 {
			t.Errorf("money: %+v", rep.Keys)
		}
		if i, ok := byKey["ties"]; !ok || len(rep.Keys[i].Ties) != 1 || rep.Keys[i].Ties[0].Wins != "c" || len(rep.Keys[i].Ties[0].Members) != 3 {
			t.Errorf("ties: %+v", rep.Keys)
		}
		if i, ok := byKey["big"]; !ok || rep.Keys[i].LargeN != 1 {
			t.Errorf("big: %+v", rep.Keys)
		}
		if i, ok := byKey["forever"]; !ok || !rep.Keys[i].NoTTL {
			t.Errorf("forever: %+v", rep.Keys)
		}
		if _, ok := byKey["clean"]; ok {
			t.Errorf("clean key reported: %+v", rep.Keys)
		}
		if len(rep.Damaged) != 1 || rep.Damaged[0] != "10086" {
			t.Errorf("damaged: %v", rep.Damaged)
		}
		// The text report, and a clean selection exits 0.
		r = tierset(t, "audit", "-redis", s.url, "-match", p+":clean", "-tierset-prefix", "")
		r.expect(t, 0)
		if !strings.Contains(r.stdout, "summary: 1 sorted set matching") || !strings.Contains(r.stdout, "scanned a keyspace of") {
			t.Errorf("clean audit:\n%s", r.stdout)
		}
	}
}

// tasksOf lists the tasks of a business key (delay.Queue.List by Key).
func tasksOf(ctx context.Context, q *delay.Queue, key string) ([]delay.TaskInfo, error) {
	p, err := q.List(ctx, delay.ListOptions{Key: key})
	return p.Tasks, err
}
