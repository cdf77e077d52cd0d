package main

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/redisserver"
)

func TestParseFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, c config)
	}{
		{"defaults", nil, "", func(t *testing.T, c config) {
			if c.duration != 150*time.Millisecond || len(c.tiers) != 3 || c.tiers[2] != 3000 || len(c.conc) != 2 || c.conc[1] != 4 || c.delay || c.strict {
				t.Errorf("%+v", c)
			}
		}},
		{"quick", []string{"-quick"}, "", func(t *testing.T, c config) {
			if c.duration != 150*time.Millisecond || len(c.tiers) != 2 {
				t.Errorf("%+v", c)
			}
		}},
		{"full", []string{"-full"}, "", func(t *testing.T, c config) {
			if c.duration != 2*time.Second || len(c.tiers) != 4 || len(c.conc) != 2 || !c.delay {
				t.Errorf("%+v", c)
			}
		}},
		{"full keeps an explicit duration", []string{"-full", "-duration", "1s"}, "", func(t *testing.T, c config) {
			if c.duration != time.Second {
				t.Errorf("%+v", c)
			}
		}},
		{"quick and full", []string{"-quick", "-full"}, "exclusive", nil},
		{"two backends", []string{"-redis", "redis://127.0.0.1:1/0", "-miniredis"}, "exclusive", nil},
		{"scaling without cluster", []string{"-scaling"}, "-scaling needs -cluster", nil},
		{"peers on miniredis", []string{"-peers", "-miniredis"}, "need a single real Redis", nil},
		{"service on a cluster", []string{"-service", "-cluster", "127.0.0.1:7000"}, "need a single real Redis", nil},
		{"storm on miniredis", []string{"-storm", "-miniredis"}, "-storm needs a single real Redis", nil},
		{"storm", []string{"-storm", "-quick"}, "", func(t *testing.T, c config) {
			if !c.storm || !c.quick {
				t.Errorf("%+v", c)
			}
		}},
		{"bigcart on a cluster", []string{"-bigcart", "-cluster", "127.0.0.1:7000"}, "-bigcart needs a single real Redis", nil},
		{"bigcart", []string{"-bigcart", "-quick"}, "", func(t *testing.T, c config) {
			if !c.bigcart || c.storm || !c.quick {
				t.Errorf("%+v", c)
			}
		}},
		{"bad prefix", []string{"-prefix", "a{b}"}, "-prefix", nil},
		{"bad tiers", []string{"-tiers", "3,x"}, "-tiers", nil},
		{"stray argument", []string{"x"}, "unexpected argument", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseFlags(tc.args, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

// TestMiniredisRun: on miniredis the first line names the backend and why,
// timing floors are printed as not judged, round trips and bytes per
// lookup are judged, and -strict passes on what it judges.
func TestMiniredisRun(t *testing.T) {
	t.Parallel()
	var out, errOut strings.Builder
	code := realMain([]string{"-miniredis", "-quick", "-strict", "-tiers", "3,300", "-duration", "100ms"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	s := out.String()
	first, _, _ := strings.Cut(s, "\n")
	if !strings.HasPrefix(first, "backend: miniredis") || !strings.Contains(first, "-miniredis") {
		t.Errorf("first line %q", first)
	}
	for _, want := range []string{
		"not judged (miniredis is not Redis)",
		"bytes read per lookup, range vs fullscan, 300 tiers",
		"round trips per MatchCart of 20 lines",
		"round trips per EnqueueBatch of 1000 jobs",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, "round trips per") && !strings.Contains(line, "PASS") {
			t.Errorf("round-trip floor not passed on miniredis: %q", line)
		}
	}
}

// TestPrivateServerRun: with no backend flag and redis-server on PATH, the
// run starts its own server, says so on its first line, judges the memory
// floor there, and leaves no server behind.
func TestPrivateServerRun(t *testing.T) {
	t.Parallel()
	if !redisserver.Have() {
		t.Skip("redis-server not on PATH: the run would use miniredis")
	}
	var out, errOut strings.Builder
	code := realMain([]string{"-quick", "-tiers", "3,30", "-duration", "100ms"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	first, _, _ := strings.Cut(out.String(), "\n")
	const mark = "a private redis-server on "
	i := strings.Index(first, mark)
	if i < 0 {
		t.Fatalf("first line %q does not name the private server", first)
	}
	addr, _, _ := strings.Cut(first[i+len(mark):], " ")
	for _, want := range []string{
		"memory per pending task, payload excluded (MEMORY USAGE)",
		// The burst's server cost, at the batch of the floor and at
		// the one bench/peers compares.
		"take+ack burst, batch 100: Redis CPU per 1,000 tasks",
		"take+ack burst, batch 1000: rate one Redis core allows at that cost",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "memory per pending task") && strings.Contains(line, "not judged") {
			t.Errorf("memory floor not judged on a real server: %q", line)
		}
	}
	_, rest, ok := strings.Cut(errOut.String(), "started "+addr+" for this run (dir ")
	dir, _, _ := strings.Cut(rest, ")")
	if !ok || dir == "" {
		t.Fatalf("stderr names no directory for %s:\n%s", addr, errOut.String())
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the server's directory %s is still there: %v", dir, err)
	}
	// The port may have been taken since by another server; ours is the one in dir.
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	if got, err := c.ConfigGet(context.Background(), "dir").Result(); err == nil && got["dir"] == dir {
		t.Fatalf("the private server at %s (dir %s) still answers after the run", addr, dir)
	}
}
