package main_test

import (
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"github.com/tierset/tierset/internal/testredis"
)

// TestRedisFromEnv: $TIERSET_REDIS_URL is the Redis of every command
// given no -redis; -redis wins over it, and -rules (match's embedded
// Redis) too. Every command that reaches a server names it and its
// database on stderr before it does anything, with where the value came
// from, and never prints the password, from argv or from the
// environment.
func TestRedisFromEnv(t *testing.T) {
	t.Parallel()
	const pw = "env-s3cret-pw"
	m := miniredis.RunT(t)
	m.RequireAuth(pw)
	envURL := "redis://:" + pw + "@" + m.Addr() + "/3"
	closed := "redis://" + testredis.ClosedAddr(t) + "/0"
	for _, c := range []struct {
		name  string
		env   []string
		args  []string
		code  int
		first string // stderr's first line
	}{
		{"env only", []string{"TIERSET_REDIS_URL=" + envURL},
			[]string{"queue", "ls"}, 0, "tierset: redis " + m.Addr() + " db 3 (from $TIERSET_REDIS_URL)"},
		{"flag wins over env", []string{"TIERSET_REDIS_URL=" + closed},
			[]string{"queue", "ls", "-redis", envURL}, 0, "tierset: redis " + m.Addr() + " db 3 (from -redis)"},
		{"audit from env", []string{"TIERSET_REDIS_URL=" + envURL},
			[]string{"audit", "-match", "nothing-here*"}, 0, "tierset: redis " + m.Addr() + " db 3 (from $TIERSET_REDIS_URL)"},
		{"match -rules stays embedded", []string{"TIERSET_REDIS_URL=" + closed},
			[]string{"match", "-rules", "examples/rules.json", "-promo", "10086", "-value", "150", "-at", matchAt}, 0,
			"tierset: warning: no -redis given: using an embedded in-memory Redis; nothing persists after this command exits"},
		{"neither", nil, []string{"queue", "ls"}, 2, "tierset queue: -redis (or $TIERSET_REDIS_URL) is required: a queue lives in a real Redis"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := tiersetEnv(t, c.env, c.args...)
			r.expect(t, c.code)
			if first, _, _ := strings.Cut(r.stderr, "\n"); first != c.first {
				t.Errorf("stderr's first line %q, want %q\nstdout:\n%s", first, c.first, r.stdout)
			}
			if strings.Contains(r.stdout+r.stderr, pw) {
				t.Errorf("the password was printed:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			}
		})
	}
}
