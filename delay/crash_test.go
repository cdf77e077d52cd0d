package delay

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/soak"
	"github.com/tierset/tierset/internal/testredis"
)

// Environment of the helper (child) process.
const (
	envHelper       = "DELAY_TEST_HELPER"
	envHelperPrefix = "DELAY_TEST_HELPER_PREFIX"
	// envHelperBeat, when set, is the child worker's heartbeat interval
	// (TestFaultHeartbeatKilledWorker).
	envHelperBeat = "DELAY_TEST_HELPER_BEAT"
)

const crashLease = 300 * time.Millisecond

func crashQueue(c redis.UniversalClient, prefix string) (*Queue, error) {
	return New(c, "crash", Options{Prefix: prefix, Lease: crashLease, MaxAttempts: 1000})
}

// crashHandler logs every delivery to a Redis list before working on it:
// "id|attempt|delivered ms|deadline ms|who".
func crashHandler(c redis.UniversalClient, logKey, who string) Handler {
	return func(ctx context.Context, t *Task) error {
		entry := fmt.Sprintf("%s|%d|%d|%d|%s", t.ID, t.Attempt, t.DeliveredAt.UnixMilli(), t.Deadline.UnixMilli(), who)
		if err := c.RPush(ctx, logKey, entry).Err(); err != nil {
			return err
		}
		time.Sleep(40 * time.Millisecond) // the SIGKILL lands here most of the time
		return nil
	}
}

// exitOn ends a helper process with status 2 when err is not nil: the
// process has no test of its own to fail, and its parent reads the status.
func exitOn(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// childOptions are a helper process's client options for its parent's
// server (testredis.ChildEnv).
func childOptions() *redis.Options {
	opt, err := redis.ParseURL(testredis.URL())
	exitOn(err)
	opt.ContextTimeoutEnabled = true
	return opt
}

// runChild runs a helper process's worker until SIGTERM, then ends the
// process with status 0.
func runChild(w *Pool) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	_ = w.Run(ctx)
	os.Exit(0)
}

// TestHelperProcess is the child of TestSIGKILLMidHandler; it does nothing
// unless started by it.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(envHelper) != "1" {
		t.Skip("helper process only")
	}
	c := redis.NewClient(childOptions())
	prefix := os.Getenv(envHelperPrefix)
	q, err := crashQueue(c, prefix)
	exitOn(err)
	beat, _ := time.ParseDuration(os.Getenv(envHelperBeat))
	w, _ := newWorker(q, crashHandler(c, prefix+":testlog", "child"), workerOpts{Concurrency: 4, Heartbeat: beat})
	runChild(w)
}

// At-least-once delivery through a crash: a consumer SIGKILLed mid-handler
// loses nothing, and redeliveries come only after the lease expired.
func TestSIGKILLMidHandler(t *testing.T) {
	t.Parallel()
	b := testredis.Redis(t) // a real child process needs a real server
	ctx := testCtx(t)
	q, err := crashQueue(b.Client, b.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1500
	jobs := jobsOf(n, func(i int) Job { return Job{Key: "crash:" + strconv.Itoa(i)} })
	ids := map[string]bool{}
	for _, r := range mustEnqueueBatch(t, ctx, q, jobs) {
		ids[r.ID] = true
	}
	logKey := b.Prefix + ":testlog"
	kills := soak.Pick(20, 4) // child processes SIGKILLed mid-handler
	for i := range kills {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = testredis.ChildEnv(envHelper+"=1", envHelperPrefix+"="+b.Prefix)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// wait until the child is inside a handler, then kill it there
		before, _ := b.Client.LLen(ctx, logKey).Result()
		waitFor(t, 10*time.Second, "child delivery", func() bool {
			l, _ := b.Client.LLen(ctx, logKey).Result()
			return l > before
		})
		time.Sleep(time.Duration(rand.IntN(60)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if i == kills-1 {
			t.Logf("killed %d children", kills)
		}
	}
	// final drain in this process
	w, _ := newWorker(q, crashHandler(b.Client, logKey, "drain"), workerOpts{Concurrency: 16})
	stop := runFunc(t, w.Run)
	waitFor(t, 60*time.Second, "drain", func() bool {
		n, err := testredis.CountKeys(ctx, b.Client, q.k.tasks+":") // an emptied bucket is deleted
		return err == nil && n == 0
	})
	_ = stop()

	entries, err := b.Client.LRange(ctx, logKey, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	type delivery struct {
		attempt             int
		delivered, deadline int64
		who                 string
	}
	byID := map[string][]delivery{}
	for _, e := range entries {
		f := strings.Split(e, "|")
		a, _ := strconv.Atoi(f[1])
		d, _ := strconv.ParseInt(f[2], 10, 64)
		dl, _ := strconv.ParseInt(f[3], 10, 64)
		byID[f[0]] = append(byID[f[0]], delivery{a, d, dl, f[4]})
	}
	redelivered := 0
	for id := range ids {
		ds := byID[id]
		if len(ds) == 0 {
			t.Errorf("task %s lost: never handled", id)
			continue
		}
		for k := 1; k < len(ds); k++ {
			redelivered++
			prev, cur := ds[k-1], ds[k]
			// a child killed between its take and its log line leaves a
			// delivery unlogged, so an attempt may be skipped, never repeated
			if cur.attempt <= prev.attempt {
				t.Errorf("task %s: attempt %d after %d", id, cur.attempt, prev.attempt)
			}
			if cur.delivered <= prev.deadline {
				t.Errorf("task %s redelivered at %d before the lease of attempt %d expired at %d", id, cur.delivered, prev.attempt, prev.deadline)
			}
		}
	}
	if redelivered == 0 {
		t.Fatal("no redelivery: no kill landed mid-handler")
	}
	t.Logf("%d tasks, %d deliveries, %d redeliveries after %d SIGKILLs, all handled", n, len(entries), redelivered, kills)
	b.Client.Del(ctx, logKey)
	assertOnlyCounters(t, b, q)
}
