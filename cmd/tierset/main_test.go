package main_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/redisconf"
	"github.com/tierset/tierset/internal/testredis"
)

var binary string

// TestMain builds the binary once; every test runs it as a process.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tierset-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "tierset")
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// repoRoot is where the commands run, so the default examples/rules.json resolves.
const repoRoot = "../.."

// matchAt is inside every sample promotion's window.
const matchAt = "2026-12-15T00:00:00Z"

type result struct {
	stdout, stderr string
	code           int
}

// tierset runs the binary without $TIERSET_REDIS_URL (the tests' own
// server variable), so a command given no -redis means the embedded Redis.
func tierset(t *testing.T, args ...string) result {
	t.Helper()
	return tiersetEnv(t, nil, args...)
}

// childEnv is this process's environment without $TIERSET_REDIS_URL,
// plus extra.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, testredis.EnvURL+"=") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// tiersetEnv runs the binary with extra environment variables
// ("NAME=value"), $TIERSET_REDIS_URL unset unless given there.
func tiersetEnv(t *testing.T, extra []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = repoRoot
	cmd.Env = childEnv(extra...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Stdin = strings.NewReader("")
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

func (r result) expect(t *testing.T, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

// server is a Redis the binary reaches over TCP with -redis: a miniredis
// started by the test (always), or the real server at TIERSET_REDIS_URL.
type server struct {
	url    string
	client redis.UniversalClient
	prefix string
}

func eachServer(t *testing.T, fn func(t *testing.T, s *server)) {
	t.Helper()
	t.Run("backend=miniredis-server", func(t *testing.T) {
		m := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		fn(t, &server{url: "redis://" + m.Addr() + "/0", client: c, prefix: testredis.Prefix(t)})
	})
	if url := testredis.URL(); url != "" {
		t.Run("backend=redis", func(t *testing.T) {
			b := testredis.Redis(t) // unique prefix, SCAN+DEL of it at cleanup
			fn(t, &server{url: url, client: b.Client, prefix: b.Prefix})
		})
	}
}

func (s *server) args(args ...string) []string {
	return append(args, "-redis", s.url, "-prefix", s.prefix)
}

// said is the line a command given -redis s.url writes to stderr first,
// naming the server and database it uses.
func (s *server) said(t *testing.T) string {
	t.Helper()
	tgt, err := redisconf.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	return "tierset: " + tgt.String() + " (from -redis)\n"
}

// snapshot reads every key under the prefix with its content.
func (s *server) snapshot(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	keys, err := testredis.Keys(ctx, s.client, s.prefix)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, k := range keys {
		switch typ := s.client.Type(ctx, k).Val(); typ {
		case "zset":
			out[k] = fmt.Sprint(s.client.ZRangeWithScores(ctx, k, 0, -1).Val())
		case "hash":
			out[k] = fmt.Sprint(s.client.HGetAll(ctx, k).Val())
		default:
			out[k] = typ
		}
	}
	return out
}

var durationRE = regexp.MustCompile(` \(\d+(\.\d+)?(ms|µs|s)\)`)

// summary returns the summary line without its duration.
func summary(t *testing.T, stdout string) string {
	t.Helper()
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "summary: ") {
			return durationRE.ReplaceAllString(l, "")
		}
	}
	t.Fatalf("no summary line in:\n%s", stdout)
	return ""
}

func TestHelpAndUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string // substring
		stderr string // substring
	}{
		{"no command", nil, 2, "", "Usage:\n  tierset warm"},
		{"unknown command", []string{"frobnicate"}, 2, "", `tierset: unknown command "frobnicate"`},
		{"top help", []string{"-h"}, 0, "Usage:\n  tierset warm", ""},
		{"warm help", []string{"warm", "-h"}, 0, "Usage: tierset warm -rules FILE", ""},
		{"match help", []string{"match", "-h"}, 0, "  -rounding string\n    \thow the discount is rounded", ""},
		{"demo help", []string{"demo", "-h"}, 0, "Usage: tierset demo", ""},
		{"queue help", []string{"queue", "-h"}, 0, "Usage: tierset queue", ""},
		{"warm without -rules", []string{"warm"}, 2, "", "tierset warm: -rules is required\nRun \"tierset warm -h\" for help.\n"},
		{"warm unknown flag", []string{"warm", "-rules", "x", "-frob"}, 2, "", "tierset warm: flag provided but not defined: -frob"},
		{"warm positional", []string{"warm", "-rules", "examples/rules.json", "extra"}, 2, "", `tierset warm: unexpected argument "extra"`},
		{"warm bad progress", []string{"warm", "-rules", "examples/rules.json", "-progress", "sometimes"}, 2, "", `-progress "sometimes": want auto, always or never`},
		{"warm bad url", []string{"warm", "-rules", "examples/rules.json", "-redis", "http://x"}, 2, "", `tierset warm: -redis: http://x: redis: invalid URL scheme: http`},
		{"match without -promo", []string{"match", "-value", "3"}, 2, "", "tierset match: -promo and -value are required"},
		{"match bad value", []string{"match", "-promo", "p", "-value", "3,5"}, 2, "", `tierset match: -value "3,5": want a non-negative decimal`},
		{"match negative value", []string{"match", "-promo", "p", "-value", "-1"}, 2, "", `tierset match: -value "-1"`},
		{"match bad rounding", []string{"match", "-promo", "p", "-value", "1", "-rounding", "bankers"}, 2, "", `-rounding "bankers": want down, half-up, half-even or up`},
		{"match bad time", []string{"match", "-promo", "p", "-value", "1", "-at", "tomorrow"}, 2, "", `-at "tomorrow": want an RFC 3339 time`},
		{"match -rules with -redis", []string{"match", "-promo", "p", "-value", "1", "-redis", "redis://127.0.0.1:1", "-rules", "x.json"}, 2, "", "-rules only applies without -redis"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := tierset(t, tc.args...)
			r.expect(t, tc.code)
			if !strings.Contains(r.stdout, tc.stdout) {
				t.Errorf("stdout lacks %q:\n%s", tc.stdout, r.stdout)
			}
			if !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, r.stderr)
			}
			if tc.code == 0 && r.stderr != "" {
				t.Errorf("help wrote to stderr: %s", r.stderr)
			}
		})
	}
}

// TestBadFiles: a bad rules file exits 1 with the precise message and
// writes nothing.
func TestBadFiles(t *testing.T) {
	t.Parallel()
	bad := filepath.Join("rules", "testdata", "bad")
	tests := []struct {
		file  string
		extra []string
		msg   string
	}{
		{"sub_cent.json", nil, `: promotion "10086" tier 2 (id "t3"): threshold "99.999" has 3 fractional digits, currency allows 2`},
		{"syntax_error.json", nil, `:7:5: JSON syntax error: invalid character '}' looking for beginning of object key string`},
		{"unknown_field.json", nil, `: promotion "10086": unknown field "colour"`},
		{"duplicate_promotion.json", nil, `: promotion "10086": id "10086" is also the id of promotions[0] (ids must be unique in a file)`},
		{"float_like.json", nil, `: promotion "10086" tier 0 (id "t1"): threshold "1e400" is not a plain decimal`},
		{"end_before_start.json", nil, `: promotion "10086": end 2026-11-01T00:00:00Z is not after start 2026-12-01T00:00:00Z`},
		{"sub_cent.json", []string{"-max-bytes", "100"}, `: input is larger than the 100-byte limit (`},
		{"dup_key_top.json", []string{"-prune"}, `:19:2: duplicate key "promotions" at promotions (first given at line 3, column 2)`},
		{"dup_key_reward.json", nil, `:12:62: duplicate key "amount" at promotions[0].tiers[0].reward.amount (first given at line 12, column 43)`},
		{"dup_key_case.json", nil, `:6:6: duplicate key "ID" at promotions[0].ID`},
		{"utf8_gift_name.json", nil, `:13:59: byte 0xff in a string at promotions[0].tiers[0].gifts[0].name is not UTF-8`},
		{"utf8_id.json", nil, `:5:16: byte 0xc3 in a string at promotions[0].id is not UTF-8`},
		{"utf8_surrogate.json", nil, `:13:59: the escaped code point U+D800 at promotions[0].tiers[0].gifts[0].name is a lone UTF-16 surrogate`},
		{"long_number.json", nil, `:11:23: a string of 200001 bytes is longer than the 4096 a rules file allows: "1000000000000000000000000000000000000000…`},
	}
	eachServer(t, func(t *testing.T, s *server) {
		for _, tc := range tests {
			t.Run(strings.TrimSuffix(tc.file, ".json")+strings.Join(tc.extra, ""), func(t *testing.T) {
				path := filepath.Join(bad, tc.file)
				r := tierset(t, s.args(append([]string{"warm", "-rules", path}, tc.extra...)...)...)
				r.expect(t, 1)
				want := "tierset warm: " + path + tc.msg
				if !strings.HasPrefix(r.stderr, want) {
					t.Errorf("stderr\n got: %.500s\nwant: %s…", r.stderr, want)
				}
				if len(r.stderr) > 1000 {
					t.Errorf("stderr is %d bytes: messages must quote only a prefix", len(r.stderr))
				}
				if n, err := testredis.CountKeys(context.Background(), s.client, s.prefix); err != nil || n != 0 {
					t.Errorf("%d keys written (%v)", n, err)
				}
			})
		}
	})
	t.Run("missing file", func(t *testing.T) {
		r := tierset(t, "warm", "-rules", "nope.json")
		r.expect(t, 1)
		if !strings.Contains(r.stderr, "tierset warm: rules: open nope.json: no such file or directory") {
			t.Errorf("stderr: %s", r.stderr)
		}
	})
}

// writeRules writes a variant of the sample: without the first promotion,
// and with 10086's first reward changed.
func variant(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "examples", "rules.json"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	start := strings.Index(s, `    {
      "id": "qty-3-5-10"`)
	end := strings.Index(s, `    {
      "id": "10086"`)
	if start < 0 || end < 0 {
		t.Fatal("sample layout changed: update variant()")
	}
	s = s[:start] + s[end:]
	s = strings.Replace(s, `"reward": {"kind": "amount_off", "amount": "10"}`, `"reward": {"kind": "amount_off", "amount": "12"}`, 1)
	path, err := filepath.Abs(filepath.Join(t.TempDir(), "variant.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestWarmEndToEnd(t *testing.T) {
	t.Parallel()
	eachServer(t, func(t *testing.T, s *server) {
		sample := filepath.Join("examples", "rules.json")
		r := tierset(t, s.args("warm", "-rules", sample)...)
		r.expect(t, 0)
		if got, want := summary(t, r.stdout), "summary: added 6, updated 0, unchanged 0, pruned 0, refused 0"; got != want {
			t.Errorf("first warm: %q, want %q", got, want)
		}
		if r.stderr != s.said(t) {
			t.Errorf("stderr with -redis: %q, want %q", r.stderr, s.said(t))
		}
		if strings.Contains(r.stdout, "\r") {
			t.Error("progress line drawn although stdout is not a terminal")
		}
		before := s.snapshot(t)

		r = tierset(t, s.args("warm", "-rules", sample, "-progress", "always")...)
		r.expect(t, 0)
		if got, want := summary(t, r.stdout), "summary: added 0, updated 0, unchanged 6, pruned 0, refused 0"; got != want {
			t.Errorf("second warm: %q, want %q", got, want)
		}
		if !strings.Contains(r.stdout, "\rwarming 6/6 (100%)") {
			t.Errorf("-progress always drew no final progress line:\n%q", r.stdout)
		}
		if after := s.snapshot(t); !reflect.DeepEqual(before, after) {
			t.Error("second warm changed Redis")
		}

		v := variant(t)
		r = tierset(t, s.args("warm", "-rules", v, "-dry-run", "-prune")...)
		r.expect(t, 0)
		for _, want := range []string{
			"dry run: nothing was written; this is what a real run would do\n",
			"updated: 10086\n",
			"pruned: qty-3-5-10\n",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("dry run output lacks %q:\n%s", want, r.stdout)
			}
		}
		if got, want := summary(t, r.stdout), "summary: added 0, updated 1, unchanged 4, pruned 1, refused 0"; got != want {
			t.Errorf("dry run: %q, want %q", got, want)
		}
		if after := s.snapshot(t); !reflect.DeepEqual(before, after) {
			t.Error("dry run changed Redis")
		}

		r = tierset(t, s.args("warm", "-rules", v)...)
		r.expect(t, 0)
		if !strings.Contains(r.stdout, "stored but not in the file (kept; -prune deletes them): qty-3-5-10\n") {
			t.Errorf("no would-prune listing:\n%s", r.stdout)
		}
		if got, want := summary(t, r.stdout), "summary: added 0, updated 1, unchanged 4, pruned 0, refused 0"; got != want {
			t.Errorf("warm variant: %q, want %q", got, want)
		}
		r = tierset(t, s.args("warm", "-rules", v, "-prune")...)
		r.expect(t, 0)
		if got, want := summary(t, r.stdout), "summary: added 0, updated 0, unchanged 5, pruned 1, refused 0"; got != want {
			t.Errorf("warm -prune: %q, want %q", got, want)
		}
		r = tierset(t, s.args("match", "-promo", "qty-3-5-10", "-value", "7", "-at", matchAt)...)
		r.expect(t, 1)
		if want := s.said(t) + fmt.Sprintf("tierset match: promotion \"qty-3-5-10\": not found under prefix %q\n", s.prefix); r.stderr != want {
			t.Errorf("match pruned promotion: stderr %q, want %q", r.stderr, want)
		}
		r = tierset(t, s.args("match", "-promo", "10086", "-value", "150", "-at", matchAt)...)
		r.expect(t, 0)
		if !strings.Contains(r.stdout, "  reward:   12 off\n  discount: 12.00 off 150.00, pay 138.00 (rounding half-up)\n") {
			t.Errorf("match after update:\n%s", r.stdout)
		}
	})
}

var versionRE = regexp.MustCompile(`version [0-9a-f]{16}`)

func TestMatchOutput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"amount hit with gifts and next", []string{"-promo", "10086", "-value", "150"}, 0, `promotion 10086: amount, threshold, 2 minor digits, 2 tiers, version V
  value:    150.00
  tier:     t1 (threshold 99.99)
  reward:   10 off
  discount: 10.00 off 150.00, pay 140.00 (rounding half-up)
  gifts:    1 × TOTE-01 (Canvas tote bag)
  next:     t2 at 199.99: 49.99 more for 25 off
`},
		{"quantity hit, base and rounding", []string{"-promo", "qty-3-5-10", "-value", "7", "-base", "69.65", "-rounding", "down"}, 0, `promotion qty-3-5-10: quantity, threshold, 2 minor digits, 3 tiers, version V
  value:    7 items
  tier:     buy5 (threshold 5 items)
  reward:   20% off
  discount: 13.93 off 69.65, pay 55.72 (rounding down)
  gifts:    none
  next:     buy10 at 10 items: 3 items more for 30% off, capped at 500
`},
		{"half-up rounds the same line up", []string{"-promo", "qty-3-5-10", "-value", "3", "-base", "0.05"}, 0, `  discount: 0.01 off 0.05, pay 0.04 (rounding half-up)`},
		{"quantity without base", []string{"-promo", "qty-3-5-10", "-value", "3"}, 0, "  discount: pass -base (the line total in money) to compute it\n"},
		{"every-n capped", []string{"-promo", "every-100-10", "-value", "987.65"}, 0, "  discount: 50.00 off 987.65, pay 937.65 (rounding half-up)\n  gifts:    none\n  next:     none (top tier)\n"},
		{"below the lowest tier", []string{"-promo", "10086", "-value", "99.98"}, 0, "  tier:     none reached\n  next:     t1 at 99.99: 0.01 more for 10 off\n"},
		{"JPY", []string{"-promo", "jp-5000", "-value", "12000"}, 0, "  value:    12000\n  tier:     y10000 (threshold 10000)\n  reward:   1200 off\n  discount: 1200 off 12000, pay 10800 (rounding half-up)\n"},
		{"parity", []string{"-promo", "parity-odd-even", "-value", "5", "-base", "100"}, 0, "parity_discount, 2 minor digits, 2 tiers, version V\n  value:    5 items\n  tier:     fourth (threshold 4 items)\n"},
		{"fixed price", []string{"-promo", "bundle-2-for-30", "-value", "2", "-base", "39.80"}, 0, "  discount: 9.80 off 39.80, pay 30.00 (rounding half-up)\n"},
	}
	check := func(t *testing.T, r result, code int, want string) {
		t.Helper()
		r.expect(t, code)
		if got := versionRE.ReplaceAllString(r.stdout, "version V"); !strings.Contains(got, want) {
			t.Errorf("stdout:\n%s\nlacks:\n%s", got, want)
		}
	}
	t.Run("backend=embedded", func(t *testing.T) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				r := tierset(t, append([]string{"match", "-at", matchAt}, tc.args...)...)
				check(t, r, tc.code, tc.want)
				if !strings.Contains(r.stderr, "nothing persists") || !strings.Contains(r.stderr, "warmed 6 promotions from examples/rules.json") {
					t.Errorf("stderr: %s", r.stderr)
				}
			})
		}
	})
	eachServer(t, func(t *testing.T, s *server) {
		tierset(t, s.args("warm", "-rules", filepath.Join("examples", "rules.json"))...).expect(t, 0)
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				r := tierset(t, s.args(append([]string{"match", "-at", matchAt}, tc.args...)...)...)
				check(t, r, tc.code, tc.want)
				if r.stderr != s.said(t) {
					t.Errorf("stderr: %s", r.stderr)
				}
			})
		}
	})
	t.Run("not active", func(t *testing.T) {
		r := tierset(t, "match", "-promo", "qty-3-5-10", "-value", "7", "-at", "2031-01-01T00:00:00Z")
		r.expect(t, 1)
		if !strings.Contains(r.stdout, "  not active at 2031-01-01T00:00:00Z (window [2026-01-01T00:00:00Z, 2030-01-01T00:00:00Z))\n") ||
			!strings.Contains(r.stderr, `tierset match: promotion "qty-3-5-10" is not active at 2031-01-01T00:00:00Z`) {
			t.Errorf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		}
	})
	t.Run("embedded with another rules file", func(t *testing.T) {
		r := tierset(t, "match", "-rules", filepath.Join("rules", "testdata", "bad", "negative.json"), "-promo", "10086", "-value", "1")
		r.expect(t, 1)
		if !strings.Contains(r.stderr, `negative.json: promotion "10086" tier 0 (id "t1"): threshold "-5" must be > 0`) {
			t.Errorf("stderr: %s", r.stderr)
		}
	})
}

func TestEmbeddedWarmAndDemo(t *testing.T) {
	t.Parallel()
	r := tierset(t, "warm", "-rules", filepath.Join("examples", "rules.json"))
	r.expect(t, 0)
	if r.stderr != "tierset: warning: no -redis given: using an embedded in-memory Redis; nothing persists after this command exits\n" {
		t.Errorf("stderr: %q", r.stderr)
	}
	if got, want := summary(t, r.stdout), "summary: added 6, updated 0, unchanged 0, pruned 0, refused 0"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	r = tierset(t, "demo", "-at", matchAt)
	r.expect(t, 0)
	out := durationRE.ReplaceAllString(r.stdout, "")
	for _, want := range []string{
		"== warm examples/rules.json (built in) into an embedded Redis\nadded: qty-3-5-10, 10086, every-100-10, bundle-2-for-30, parity-odd-even, jp-5000\nsummary: added 6, updated 0, unchanged 0, pruned 0, refused 0\n",
		"== warm it again: the content hashes match, nothing is written\nsummary: added 0, updated 0, unchanged 6, pruned 0, refused 0\n",
		"== tierset match -promo qty-3-5-10 -value 7 -base 139.30\n",
		"  tier:     buy5 (threshold 5 items)\n",
		"  gifts:    1 × TOTE-01 (Canvas tote bag), 2 × MUG-02 (陶瓷马克杯)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
}

// TestWarmRevisions: a rules file's revisions order its warms: an older
// file's copy of a promotion is reported stale and leaves Redis as it
// was; a newer one updates it.
func TestWarmRevisions(t *testing.T) {
	t.Parallel()
	eachServer(t, func(t *testing.T, s *server) {
		file := func(rev int, percent string) string {
			doc := `{"version": 1, "promotions": [{"id": "rev-p", "metric": "quantity", "minor_digits": 2, "revision": ` + strconv.Itoa(rev) +
				`, "tiers": [{"id": "t", "threshold": 3, "reward": {"kind": "percent_off", "percent": "` + percent + `"}}]}]}`
			path := filepath.Join(t.TempDir(), "rules.json")
			if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			return path
		}
		steps := []struct {
			rev     int
			percent string
			summary string
			stale   bool
		}{
			{5, "10", "summary: added 1, updated 0, unchanged 0, pruned 0, refused 0", false},
			{3, "20", "summary: added 0, updated 0, unchanged 0, pruned 0, refused 0, stale 1", true},
			{6, "30", "summary: added 0, updated 1, unchanged 0, pruned 0, refused 0", false},
		}
		for _, st := range steps {
			r := tierset(t, s.args("warm", "-rules", file(st.rev, st.percent))...)
			r.expect(t, 0)
			if got := summary(t, r.stdout); got != st.summary {
				t.Errorf("revision %d: %q, want %q", st.rev, got, st.summary)
			}
			if st.stale != strings.Contains(r.stdout, "stale, kept (Redis holds a newer revision): rev-p\n") {
				t.Errorf("revision %d: stale listing wrong:\n%s", st.rev, r.stdout)
			}
		}
	})
}
