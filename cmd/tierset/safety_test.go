package main_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delayraw"
	"github.com/tierset/tierset/internal/testredis"
)

const secret = "s3cr3tPw"

// noSecret fails when the password appears anywhere in the output.
func (r result) noSecret(t *testing.T) {
	t.Helper()
	for name, out := range map[string]string{"stdout": r.stdout, "stderr": r.stderr} {
		if strings.Contains(out, secret) {
			t.Errorf("%s holds the password:\n%s", name, out)
		}
	}
}

// TestNoSecretInOutput: every command, in every way it can fail before
// or while reaching Redis, prints the URL with its password redacted.
func TestNoSecretInOutput(t *testing.T) {
	t.Parallel()
	down := "redis://:" + secret + "@127.0.0.1:1/0"
	rules := filepath.Join("examples", "rules.json")
	tests := []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"warm, server down", []string{"warm", "-rules", rules, "-redis", down}, 1, "redis redis://:xxxxx@127.0.0.1:1/0: "},
		{"warm, -redis=URL form", []string{"warm", "-rules", rules, "-redis=" + down}, 1, "redis://:xxxxx@127.0.0.1:1/0"},
		{"warm, user and password", []string{"warm", "-rules", rules, "-redis", "redis://alice:" + secret + "@127.0.0.1:1/0"}, 1, "redis://alice:xxxxx@127.0.0.1:1/0"},
		{"warm, unparsable port (usage error)", []string{"warm", "-rules", rules, "-redis", "redis://:" + secret + "@127.0.0.1:port/0"}, 2, `-redis: redis://:xxxxx@127.0.0.1:port/0: invalid port`},
		{"warm, unknown option (usage error)", []string{"warm", "-rules", rules, "-redis", down + "?password=" + secret}, 2, "redis: unexpected option: password"},
		{"warm, password in cluster seed URLs", []string{"warm", "-rules", rules, "-redis", down + "," + down}, 1, "redis://:xxxxx@127.0.0.1:1/0,redis://:xxxxx@127.0.0.1:1/0: "},
		{"warm, comma in the password", []string{"warm", "-rules", rules, "-redis", "redis://:" + secret + ",x@127.0.0.1:1/0"}, 1, "redis redis://:xxxxx@127.0.0.1:1/0: "},
		{"match, server down", []string{"match", "-promo", "10086", "-value", "3", "-redis", down}, 1, "redis://:xxxxx@127.0.0.1:1/0"},
		{"match, bad value (usage error)", []string{"match", "-promo", "10086", "-value", "x", "-redis", down}, 2, `-value "x"`},
		{"queue, server down", []string{"queue", "stats", "-queue", "orders", "-redis", down}, 1, "redis://:xxxxx@127.0.0.1:1/0"},
		{"queue, bad name (usage error)", []string{"queue", "dead", "-queue", "a b", "-redis", down}, 2, `-queue "a b"`},
		{"demo, -redis is not its flag", []string{"demo", "-redis", down}, 2, "flag provided but not defined: -redis"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := tierset(t, tc.args...)
			r.expect(t, tc.code)
			r.noSecret(t)
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, r.stderr)
			}
		})
	}
	// A server that wants the password: progress, summaries and answers
	// of a working run hold no secret either.
	t.Run("working run with progress", func(t *testing.T) {
		srv := testredis.StartServer(t, "--requirepass", secret)
		url := "redis://:" + secret + "@" + srv.Addr() + "/0"
		for _, args := range [][]string{
			{"warm", "-rules", rules, "-redis", url, "-progress", "always"},
			{"warm", "-rules", rules, "-redis", url, "-dry-run", "-prune"},
			{"match", "-promo", "10086", "-value", "150.00", "-at", matchAt, "-redis", url},
			{"queue", "ls", "-redis", url},
		} {
			r := tierset(t, args...)
			r.expect(t, 0)
			r.noSecret(t)
		}
		r := tierset(t, "warm", "-rules", rules, "-redis", "redis://:wrong"+secret+"@"+srv.Addr()+"/0")
		r.expect(t, 1)
		r.noSecret(t)
		if !strings.Contains(r.stderr, "redis://:xxxxx@"+srv.Addr()+"/0") {
			t.Errorf("stderr: %s", r.stderr)
		}
	})
}

// TestQueueDeadEscapesStoredText: a handler's error text is stored as
// given; "queue dead" prints it with ESC, CR and LF escaped, so it can
// neither drive the terminal nor forge a line of output.
func TestQueueDeadEscapesStoredText(t *testing.T) {
	eachServer(t, func(t *testing.T, s *server) {
		ctx := context.Background()
		q, err := delay.New(s.client, "esc", delay.Options{Prefix: s.prefix})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Enqueue(ctx, delay.Job{Key: "order-1", When: delay.After(0)}); err != nil {
			t.Fatal(err)
		}
		b, err := delayraw.Take(ctx, q, 1)
		if err != nil || len(b) != 1 {
			t.Fatalf("take: %v, %d tasks", err, len(b))
		}
		hostile := "boom\x1b[2J\x1b]0;pwned\x07\r\n  fake-id  key \"x\"  error: all good\u202e\xff"
		if _, err := delayraw.Kill(ctx, q, b[0], errors.New(hostile)); err != nil {
			t.Fatal(err)
		}
		r := tierset(t, s.args("queue", "dead", "-queue", "esc")...)
		r.expect(t, 0)
		for _, c := range []string{"\x1b", "\r", "\x07", "\u202e", "\xff"} {
			if strings.Contains(r.stdout, c) {
				t.Errorf("stdout holds %q:\n%q", c, r.stdout)
			}
		}
		if lines := strings.Count(r.stdout, "\n"); lines != 3 {
			t.Errorf("%d lines, want 3 (title, header and one dead letter):\n%s", lines, r.stdout)
		}
		if want := `  boom\x1b[2J\x1b]0;pwned\a\r\n  fake-id  key "x"  error: all good\u202e\xff` + "\n"; !strings.HasSuffix(r.stdout, want) {
			t.Errorf("stdout\n got: %q\nwant suffix: %q", r.stdout, want)
		}
	})
}

// TestWarmPruneLimitCLI: -prune refuses to delete more than -max-prune
// (default 10% of what is stored, at least 1), prints what would go and
// changes nothing; an explicit -max-prune lets it through. A file with
// two "promotions" lists, which once warmed the second and pruned the
// rest, is refused before Redis is touched.
func TestWarmPruneLimitCLI(t *testing.T) {
	t.Parallel()
	eachServer(t, func(t *testing.T, s *server) {
		sample := filepath.Join("examples", "rules.json")
		tierset(t, s.args("warm", "-rules", sample)...).expect(t, 0)
		before := s.snapshot(t)
		small := keepFirst(t, 2)

		r := tierset(t, s.args("warm", "-rules", small, "-prune")...)
		r.expect(t, 1)
		if !strings.Contains(r.stdout, "would prune ") || !strings.Contains(r.stderr, "warm: prune limit exceeded") ||
			!strings.Contains(r.stderr, "run again with -max-prune ") {
			t.Errorf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		}
		if after := s.snapshot(t); !reflect.DeepEqual(after, before) {
			t.Error("a refused prune changed Redis")
		}

		dup := filepath.Join("rules", "testdata", "bad", "dup_key_top.json")
		r = tierset(t, s.args("warm", "-rules", dup, "-prune", "-max-prune", "100")...)
		r.expect(t, 1)
		if !strings.Contains(r.stderr, `duplicate key "promotions"`) {
			t.Errorf("stderr: %s", r.stderr)
		}
		if after := s.snapshot(t); !reflect.DeepEqual(after, before) {
			t.Error("a file with duplicate keys changed Redis")
		}

		r = tierset(t, s.args("warm", "-rules", small, "-prune", "-max-prune", "100")...)
		r.expect(t, 0)
		if !strings.Contains(r.stdout, "pruned: ") {
			t.Errorf("stdout:\n%s", r.stdout)
		}
		tierset(t, s.args("warm", "-rules", small, "-max-prune", "-1")...).expect(t, 2)
	})
}

// keepFirst writes the sample with only its first n promotions.
func keepFirst(t *testing.T, n int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "examples", "rules.json"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	starts := []int{}
	for i := 0; ; {
		j := strings.Index(s[i:], "\n    {\n      \"id\": ")
		if j < 0 {
			break
		}
		starts = append(starts, i+j)
		i += j + 1
	}
	if len(starts) <= n {
		t.Fatalf("sample has %d promotions, want more than %d", len(starts), n)
	}
	end := strings.LastIndex(s, "\n  ]")
	s = strings.TrimRight(s[:starts[n]], ",") + s[end:]
	path := filepath.Join(t.TempDir(), "small.json")
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// TestOverlongArguments: a 100 kB argument (Linux passes at most 128 kB
// in one) is refused before any flag or number is parsed, with a message
// that quotes only a prefix.
func TestOverlongArguments(t *testing.T) {
	huge := strings.Repeat("9", 100_000)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"-value", []string{"match", "-promo", "p", "-value", huge}, "is longer than 4096 bytes"},
		{"-limit", []string{"queue", "dead", "-queue", "q", "-redis", "redis://127.0.0.1:1", "-limit", huge}, "is longer than 4096 bytes"},
		{"-value of 41 digits", []string{"match", "-promo", "p", "-value", huge[:41]}, "longer than 40 characters"},
		{"-limit of 4000 digits", []string{"queue", "dead", "-queue", "q", "-limit", huge[:4000]}, "… (4000 bytes)"},
		{"-at of 4000 bytes", []string{"match", "-promo", "p", "-value", "1", "-at", huge[:4000]}, "… (4000 bytes)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			r := tierset(t, tc.args...)
			r.expect(t, 2)
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr lacks %q:\n%.300s", tc.want, r.stderr)
			}
			if len(r.stderr) > 400 {
				t.Errorf("stderr is %d bytes: it must quote only a prefix", len(r.stderr))
			}
			t.Logf("refused in %v (process start included)", time.Since(start))
		})
	}
}
