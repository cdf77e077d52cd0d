package main

import (
	"context"
	"strings"
	"testing"

	"github.com/tierset/tierset/internal/redisconf"
)

func TestWebShownURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"redis://:s3cret@db:6379/0":            "redis://:xxxxx@db:6379/0",
		"rediss://user:s3cret@db:6380/1?x=key": "rediss://user:xxxxx@db:6380/1",
		"redis://db:6379":                      "redis://db:6379",
	} {
		if got := webShownURL(in); got != want {
			t.Errorf("webShownURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestWebFlags: bad flag combinations are usage errors (exit 2) before anything listens.
// Not parallel: it runs the command in this process with
// $TIERSET_REDIS_URL unset, which would otherwise name a server.
func TestWebFlags(t *testing.T) {
	t.Setenv(redisconf.EnvURL, "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "exactly one of -redis"},
		{[]string{"-redis", "redis://x", "-cluster", "a:1"}, "exactly one of -redis"},
		{[]string{"-redis", "redis://:pw@127.0.0.1:1", "-listen", "0.0.0.0:0"}, "not loopback"},
		{[]string{"-redis", "redis://x", "-queues", "a b"}, "-queues"},
		{[]string{"-redis", "redis://x", "-tz", "Mars/Olympus"}, `-tz "Mars/Olympus"`},
		// A password needs a URL; every message shows it redacted.
		{[]string{"-cluster", "user:pw@127.0.0.1:1"}, `-redis: user:xxxxx@127.0.0.1:1: want host:port, or a redis:// or rediss:// URL`},
		{[]string{"-cluster", "127.0.0.1:1,rediss://:pw@127.0.0.1:2"}, "every seed must use TLS (rediss://) or none"},
		{[]string{"-cluster", " , "}, "no cluster seed"},
		// redis.ParseURL's own error (no url.Error around it) is shown, not <nil>.
		{[]string{"-redis", "http://x:1"}, `-redis: http://x:1: redis: invalid URL scheme: http`},
		// url.Error quotes the URL whole: only its cause is shown.
		{[]string{"-redis", "redis://:pw@127.0.0.1:port/0"}, `-redis: redis://:xxxxx@127.0.0.1:port/0: invalid port ":port"`},
	} {
		var out, errb strings.Builder
		code := run(context.Background(), append([]string{"web"}, tc.args...), &env{stdout: &out, stderr: &errb})
		got := errb.String()
		if code != 2 || !strings.Contains(got, tc.want) || strings.Contains(got, "pw@") || strings.Contains(got, "<nil>") {
			t.Errorf("web %v: exit %d, stderr %q; want 2 mentioning %q, no password, no <nil>", tc.args, code, got, tc.want)
		}
	}
}
