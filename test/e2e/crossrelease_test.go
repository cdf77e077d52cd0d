package e2e_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/soak"
	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/internal/testrun"
	"github.com/tierset/tierset/rules"
	"github.com/tierset/tierset/warm"
)

// previousRelease is the release a rolling deploy runs beside this code
// (docs/operations.md, "Rolling deploys"), and previousCommit its commit,
// used when the clone has the history but not the tag.
const (
	previousRelease = "v0.1.0"
	previousCommit  = "f81744c1b03db3e3b94cb98c0a1d580f7a1de25f"
)

// TestCrossReleaseRollingDeploy runs the previous release's workers,
// enqueuer and warm-up (testdata/crossrelease, built from a git archive
// of the release) beside this code's on one real Redis, as a rolling
// deploy does, and checks the skew docs/operations.md promises: no task
// lost or run twice across releases; Pause and SetRate honoured by both
// releases' workers; Health counting the old workers, told apart by
// WorkerInfo.Release; and neither release's warm-up lowering a revision
// the other wrote or bringing back a promotion it deleted, so a cart
// priced here after both warm-ups gets the newest promotions' price.
func TestCrossReleaseRollingDeploy(t *testing.T) {
	soak.Require(t, "builds the previous release from git and runs its processes beside this one")
	b := testredis.Redis(t)
	bin := buildPreviousRelease(t)
	t.Run("tasks", func(t *testing.T) { crossReleaseTasks(t, b, bin) })
	t.Run("warm", func(t *testing.T) { crossReleaseWarm(t, b, bin) })
}

// buildPreviousRelease extracts previousRelease from git into a temporary
// directory, adds the driver, builds it there and returns its path.
func buildPreviousRelease(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not on PATH: cannot build the previous release")
	}
	git := func(args ...string) (string, error) {
		out, err := exec.Command("git", args...).Output()
		return strings.TrimSpace(string(out)), err
	}
	top, err := git("rev-parse", "--show-toplevel")
	if err != nil {
		t.Skip("not a git checkout: cannot build the previous release")
	}
	commit, err := git("rev-parse", "--verify", "-q", previousRelease+"^{commit}")
	if err != nil {
		if commit, err = git("rev-parse", "--verify", "-q", previousCommit+"^{commit}"); err != nil {
			shallow, _ := git("rev-parse", "--is-shallow-repository")
			t.Skipf("neither tag %s nor commit %s is in this clone (shallow: %s); `git fetch --unshallow --tags` brings them, as .ci/run does",
				previousRelease, previousCommit, shallow)
		}
	}
	driver, err := os.ReadFile(filepath.Join("testdata", "crossrelease", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	// The build takes minutes on a loaded machine: its binary is kept,
	// keyed by the release's commit and the driver's source, so a rerun
	// (or -count) builds nothing.
	sum := sha256.Sum256(append([]byte(commit+"\n"), driver...))
	cached := filepath.Join(os.TempDir(), "tierset-crossrelease", hex.EncodeToString(sum[:12]), "crossrelease")
	if _, err := os.Stat(cached); err == nil {
		return cached
	}
	dir := t.TempDir()
	// From the top: in a subdirectory git archive takes only that subtree.
	archive, err := exec.Command("git", "-C", top, "archive", "--format=tar", commit).Output()
	if err != nil {
		t.Fatalf("git archive %s: %v", commit, err)
	}
	extractTar(t, archive, dir)
	if err := os.MkdirAll(filepath.Join(dir, "cmd", "crossrelease"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cmd", "crossrelease", "main.go"), driver, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "crossrelease")
	build := exec.Command("go", "build", "-o", bin, "./cmd/crossrelease")
	build.Dir = dir
	// The release's own go.mod and go.sum, never this tree's workspace.
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the driver against %s (%s): %v\n%s", previousRelease, commit, err, out)
	}
	t.Logf("built the driver against %s (%s)", previousRelease, commit)
	// Kept by a rename, so a concurrent run never sees half a binary.
	if err := os.MkdirAll(filepath.Dir(cached), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := fmt.Sprintf("%s.%d", cached, os.Getpid())
	if err := copyFile(bin, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, cached); err != nil {
		t.Fatal(err)
	}
	return cached
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}

// extractTar writes a git archive's regular files and directories under dir.
func extractTar(t *testing.T, archive []byte, dir string) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
				var body []byte
				if body, err = io.ReadAll(tr); err == nil {
					err = os.WriteFile(path, body, 0o644)
				}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// oldProcess runs the driver with args and returns a stop that sends it
// SIGTERM (a worker's graceful shutdown) and waits for it to exit; the
// test's cleanup kills it if it is still running.
func oldProcess(t *testing.T, bin string, args ...string) (stop func()) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var werr error
	go func() { werr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	var stopped bool
	return func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
			if werr != nil {
				t.Errorf("%s %s: %v\n%s", filepath.Base(bin), args[0], werr, stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s %s did not exit within 30 s of SIGTERM", filepath.Base(bin), args[0])
		}
	}
}

// runOld runs the driver to its end and returns its stdout.
func runOld(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, ee.Stderr)
		}
		t.Fatal(err)
	}
	return out
}

// waitUntil polls cond until it holds or the deadline passes.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func crossReleaseTasks(t *testing.T, b *testredis.Backend, bin string) {
	ctx := t.Context()
	url := testredis.URL()
	q, err := delay.New(b.Client, "xr", delay.Options{Prefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	doneKey := b.Prefix + ":xr-done"
	work := func(id string) func() {
		return oldProcess(t, bin, "work", "-redis", url, "-prefix", b.Prefix, "-queue", "xr", "-id", id, "-done", doneKey)
	}
	workers := func() map[string]delay.WorkerInfo {
		t.Helper()
		h, err := q.Health(ctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]delay.WorkerInfo{}
		for _, w := range h.Workers {
			out[w.ID] = w
		}
		return out
	}
	// beats waits until each pool in ids has beaten n more times: a worker
	// that ignored a pause has had as many chances to take.
	beats := func(n int, ids ...string) {
		t.Helper()
		from := workers()
		waitUntil(t, 20*time.Second, fmt.Sprintf("%d heartbeats of %v", n, ids), func() bool {
			now := workers()
			for _, id := range ids {
				if now[id].Beat.Sub(from[id].Beat) < time.Duration(n)*time.Duration(now[id].Interval) {
					return false
				}
			}
			return true
		})
	}
	doneCount := func() int64 {
		n, err := b.Client.LLen(ctx, doneKey).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Paused before any worker starts: the old workers must not take.
	if err := q.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	stopOld1, stopOld2 := work("old-1"), work("old-2")
	waitUntil(t, 30*time.Second, "Health lists both old workers", func() bool {
		ws := workers()
		return len(ws) == 2 && ws["old-1"].ID != "" && ws["old-2"].ID != ""
	})
	runOld(t, bin, "enqueue", "-redis", url, "-prefix", b.Prefix, "-queue", "xr", "-from", "0", "-n", "100")
	h, err := q.Health(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if h.Verdict != delay.VerdictPaused || len(h.Workers) != 2 || h.Stats.Ready != 100 {
		t.Fatalf("old workers on a paused queue: verdict %v, %d workers, %d ready", h.Verdict, len(h.Workers), h.Stats.Ready)
	}
	for _, w := range h.Workers {
		if w.Release != 0 {
			t.Fatalf("an old worker reads as release %d, want 0: %+v", w.Release, w)
		}
	}
	beats(3, "old-1", "old-2")
	if n := doneCount(); n != 0 {
		t.Fatalf("the previous release's workers ran %d tasks of a paused queue", n)
	}

	// This release's pool joins; Health counts all three, by release.
	newPool := func(id string) func() error {
		p, err := delay.NewPool(delay.PoolOptions{Concurrency: 4, ID: id, Heartbeat: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		err = p.Add(q, func(ctx context.Context, task *delay.Task) error {
			time.Sleep(2 * time.Millisecond) // as the old handler: tasks spread over both releases
			return b.Client.RPush(ctx, doneKey, "new "+task.Key).Err()
		}, delay.QueueOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return testrun.Start(t, t.Context(), p.Run)
	}
	stopNew := newPool("new-1")
	waitUntil(t, 20*time.Second, "Health lists the new pool beside the old ones", func() bool { return len(workers()) == 3 })
	ws := workers()
	if ws["old-1"].Release != 0 || ws["old-2"].Release != 0 || ws["new-1"].Release < 1 {
		t.Fatalf("releases: old-1 %d, old-2 %d, new-1 %d; want 0, 0 and at least 1",
			ws["old-1"].Release, ws["old-2"].Release, ws["new-1"].Release)
	}
	beats(3, "new-1")
	if n := doneCount(); n != 0 {
		t.Fatalf("%d tasks of a paused queue ran", n)
	}

	// Resumed: both releases drain the old enqueuer's tasks and this one's;
	// one old worker stops midway, handing its taken tasks back.
	if err := q.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 100; i < 300; i += 50 {
		jobs := make([]delay.Job, 50)
		for j := range jobs {
			jobs[j] = delay.Job{Key: fmt.Sprintf("k%d", i+j)}
		}
		if _, err := q.EnqueueBatch(ctx, jobs); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 30*time.Second, "a third of the tasks done", func() bool { return doneCount() >= 100 })
	stopOld1()
	waitUntil(t, 60*time.Second, "300 tasks done", func() bool { return doneCount() >= 300 })

	// SetRate, honoured by each release alone: 11 tasks at 20/s, burst 1,
	// take at least 500 ms whoever serves them.
	rated := func(who string, from int) {
		t.Helper()
		if err := q.SetRate(ctx, delay.Rate{PerSecond: 20, Burst: 1}); err != nil {
			t.Fatal(err)
		}
		before := doneCount()
		start := time.Now()
		for i := from; i < from+11; i++ {
			if _, err := q.Enqueue(ctx, delay.Job{Key: fmt.Sprintf("k%d", i)}); err != nil {
				t.Fatal(err)
			}
		}
		waitUntil(t, 30*time.Second, who+": 11 rated tasks done", func() bool { return doneCount() >= before+11 })
		if took := time.Since(start); took < 450*time.Millisecond {
			t.Fatalf("%s ran 11 tasks in %v under a 20/s, burst 1 rate: the rate was not honoured", who, took)
		}
		if err := q.SetRate(ctx, delay.Rate{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := stopNew(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("this release's pool: %v", err)
	}
	waitUntil(t, 20*time.Second, "only old-2 listed", func() bool { return len(workers()) == 1 })
	rated("the previous release's worker", 300)
	stopNew = newPool("new-2")
	waitUntil(t, 20*time.Second, "new-2 listed", func() bool { return workers()["new-2"].ID != "" })
	stopOld2()
	rated("this release's pool", 311)
	if err := stopNew(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("this release's pool: %v", err)
	}

	// Every task ran exactly once, and each release ran some.
	const total = 322
	got, err := b.Client.LRange(ctx, doneKey, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	by := map[string]int{}
	for _, e := range got {
		who, key, _ := strings.Cut(e, " ")
		seen[key]++
		by[who]++
	}
	for i := range total {
		if k := fmt.Sprintf("k%d", i); seen[k] != 1 {
			t.Errorf("task %s ran %d times", k, seen[k])
		}
	}
	if len(got) != total || by["old"] == 0 || by["new"] == 0 {
		t.Fatalf("%d runs for %d tasks, by release %v: want each task once and both releases running some", len(got), total, by)
	}
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Pending != 0 || st.InFlight != 0 || st.Dead != 0 || st.Lost != 0 {
		t.Fatalf("after the run: %+v", st)
	}
	t.Logf("%d tasks, each run once, by release %v", total, by)
}

// The rules files of the warm-up: revision 1 has "bulk" out of reach (10
// items) and "flash" 10% off; revision 2 moves "bulk" to 5 items, 50 off,
// and drops "flash"; revision 0's file is revision 1's unordered. A cart of 5 items at 80.00 costs 350.00 under
// revision 2, 360.00 under revision 1, 310.00 with a resurrected "flash".
const (
	rulesV1 = `{"version": 1, "promotions": [
 {"id": "bulk", "metric": "quantity", "minor_digits": 2, "revision": 1,
  "tiers": [{"id": "ten", "threshold": 10, "reward": {"kind": "amount_off", "amount": "50.00"}}]},
 {"id": "flash", "metric": "quantity", "minor_digits": 2, "revision": 1,
  "tiers": [{"id": "any", "threshold": 1, "reward": {"kind": "percent_off", "percent": "10"}}]}]}`
	// rulesV0 is revision 1's file without revisions (unordered).
	rulesV0 = `{"version": 1, "promotions": [
 {"id": "bulk", "metric": "quantity", "minor_digits": 2,
  "tiers": [{"id": "ten", "threshold": 10, "reward": {"kind": "amount_off", "amount": "50.00"}}]},
 {"id": "flash", "metric": "quantity", "minor_digits": 2,
  "tiers": [{"id": "any", "threshold": 1, "reward": {"kind": "percent_off", "percent": "10"}}]}]}`
	rulesV2 = `{"version": 1, "promotions": [
 {"id": "bulk", "metric": "quantity", "minor_digits": 2, "revision": 2,
  "tiers": [{"id": "five", "threshold": 5, "reward": {"kind": "amount_off", "amount": "50.00"}}]}]}`
)

// warmSummary is the part of a warm.Summary the test reads, as either
// release reports it (the old one as JSON).
type warmSummary struct {
	Added, Updated, Unchanged, Repaired, Pruned, Stale []string
}

func crossReleaseWarm(t *testing.T, b *testredis.Backend, bin string) {
	dir := t.TempDir()
	files := map[string]string{}
	for name, body := range map[string]string{"v0": rulesV0, "v1": rulesV1, "v2": rulesV2} {
		files[name] = filepath.Join(dir, name+".json")
		if err := os.WriteFile(files[name], []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name          string
		first, second string // the release whose warm-up writes revision 1, then revision 2 (with prune)
	}{
		{"previous writes first", "old", "new"},
		{"this release writes first", "new", "old"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			prefix := b.Prefix + ":" + tc.first
			c, err := cache.New(b.Client, cache.Options{Prefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			warmBy := func(who, file string, prune bool) warmSummary {
				t.Helper()
				if who == "old" {
					args := []string{"warm", "-redis", testredis.URL(), "-prefix", prefix, "-rules", file}
					if prune {
						args = append(args, "-prune")
					}
					var s warmSummary
					if err := json.Unmarshal(runOld(t, bin, args...), &s); err != nil {
						t.Fatal(err)
					}
					return s
				}
				promos, err := rules.ParseFile(file, rules.Options{})
				if err != nil {
					t.Fatal(err)
				}
				s, err := warm.Warm(ctx, c, promos, warm.Options{Prune: prune})
				if err != nil {
					t.Fatal(err)
				}
				return warmSummary{Added: s.Added, Updated: s.Updated, Unchanged: s.Unchanged, Repaired: s.Repaired, Pruned: s.Pruned, Stale: s.Stale}
			}
			warmBy(tc.first, files["v1"], false)
			if s := warmBy(tc.second, files["v2"], true); len(s.Updated) != 1 || len(s.Pruned) != 1 {
				t.Fatalf("%s warm-up of revision 2: %+v", tc.second, s)
			}
			// The first release's warm-up runs again from its old file (a
			// process not yet upgraded): it writes nothing.
			s := warmBy(tc.first, files["v1"], false)
			if len(s.Added)+len(s.Updated)+len(s.Repaired)+len(s.Unchanged) != 0 || len(s.Stale) != 2 {
				t.Fatalf("%s warm-up of revision 1 over revision 2: %+v; want both promotions stale", tc.first, s)
			}
			// This release's warm-up from a file without revisions writes
			// nothing either, whoever wrote revision 2.
			s = warmBy("new", files["v0"], false)
			if len(s.Added)+len(s.Updated)+len(s.Repaired)+len(s.Unchanged) != 0 || len(s.Stale) != 2 {
				t.Fatalf("unordered warm-up over revision 2: %+v; want both promotions stale", s)
			}
			in, err := c.Info(ctx, "bulk")
			if err != nil || in.Revision != 2 {
				t.Fatalf("bulk after both warm-ups: revision %d, %v; want 2", in.Revision, err)
			}
			if _, err := c.Info(ctx, "flash"); !errors.Is(err, cache.ErrNotFound) {
				t.Fatalf("flash, deleted at revision 1: %v; want ErrNotFound", err)
			}
			if got := priceCart(t, ctx, c); got != "350.00" {
				t.Fatalf("5 items at 80.00 priced %s; want 350.00 (revision 2's bulk, no flash)", got)
			}
		})
	}
}

// priceCart prices 5 items at 80.00 against "bulk" and "flash" here.
func priceCart(t *testing.T, ctx context.Context, c *cache.Cache) string {
	t.Helper()
	base, items := decimal.RequireFromString("400.00"), decimal.NewFromInt(5)
	rs, err := c.MatchCart(ctx, []cache.Query{cache.QuantityQuery("bulk", 5), cache.QuantityQuery("flash", 5)}, cache.MatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	price := base
	for _, r := range rs {
		switch {
		case errors.Is(r.Err, cache.ErrNotFound), errors.Is(r.Err, cache.ErrNoTier):
			continue
		case r.Err != nil:
			t.Fatalf("%s: %v", r.Promotion, r.Err)
		}
		off, err := r.Tier.Reward.Discount(base, items, 2, gradient.RoundHalfUp)
		if err != nil {
			t.Fatal(err)
		}
		price = price.Sub(off)
	}
	return price.StringFixed(2)
}
