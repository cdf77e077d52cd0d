package cache

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/measure"
	"github.com/tierset/tierset/internal/testredis"
)

// The two-process test re-executes this test binary as a child running
// TestNearChildReader: a second process with its own near cache, its own
// connections and its own tracking, as a second cart service would be.
const (
	envNearChild  = "TIERSET_NEAR_CHILD"  // backend name: redis or cluster
	envNearPrefix = "TIERSET_NEAR_PREFIX" // key prefix of the parent's test
	nearReaders   = 4                     // per process
	nearRefreshes = 200                   // writer's refreshes
	nearConverge  = 5 * time.Second       // a reader that never converges fails
)

// pauseBetweenCarts stands for a cart handler waiting for its next
// request. Readers that never block keep every P busy, and the Go runtime
// then polls the network (where the invalidation waits) only from sysmon,
// every 10 ms: that measures the scheduler, not the near cache.
func pauseBetweenCarts() { time.Sleep(100 * time.Microsecond) }

// flipVersions returns the two versions the writer alternates, with the
// oracle and gift tag of each content hash.
func flipVersions(t testing.TB) ([2]gradient.Promotion, map[string]*gradient.Matcher, map[string]string) {
	t.Helper()
	ps := [2]gradient.Promotion{versioned("v1", 2, 4, 6, 8), versioned("v2", 3, 5, 7, 9, 11)}
	oracle, tags := map[string]*gradient.Matcher{}, map[string]string{}
	for _, p := range ps {
		v, err := Version(&p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		oracle[v], _ = gradient.NewMatcher(p)
		tags[v] = p.Tiers[0].ID[:2]
	}
	return ps, oracle, tags
}

// nearReader reads "flip" carts (Next and Gifts) until stop, checks every
// line is wholly one version, and calls seen for every cart with the
// version it was served and when the read began and returned.
func nearReader(t testing.TB, nc *Cache, r int, oracle map[string]*gradient.Matcher, tags map[string]string,
	stop <-chan struct{}, seen func(r int, version string, began, at time.Time), reads, mixed *atomic.Int64) {
	ctx := testCtx(t)
	for k := 0; ; k++ {
		select {
		case <-stop:
			return
		default:
		}
		qs := []Query{QuantityQuery("flip", int64(k%13)), QuantityQuery("flip", int64((k+r)%13)), QuantityQuery("flip", 6)}
		began := time.Now()
		rs, err := nc.MatchCart(ctx, qs, MatchOptions{Next: true, Gifts: true})
		at := time.Now()
		if err != nil {
			continue // counted as no read; a failing Redis shows as a reader that never converges
		}
		for i, res := range rs {
			reads.Add(1)
			if msg := checkWhole(oracle, tags, qs[i], res); msg != "" {
				mixed.Add(1)
				t.Errorf("reader %d: %s", r, msg)
			}
		}
		seen(r, rs[2].Version, began, at)
		pauseBetweenCarts()
	}
}

// childBackend is the backend a child process was started for (env names
// it), or skips when this process is not such a child.
func childBackend(t *testing.T, env, parent string) *testredis.Backend {
	t.Helper()
	backend := os.Getenv(env)
	if backend == "" {
		t.Skip("child process of " + parent + " only")
	}
	if backend == testredis.NameCluster {
		return testredis.Cluster(t)
	}
	return testredis.Redis(t)
}

// startReaders runs nearReaders nearReader goroutines, numbered from
// first; the returned func stops and waits for them.
func startReaders(t testing.TB, nc *Cache, first int, oracle map[string]*gradient.Matcher, tags map[string]string,
	seen func(int, string, time.Time, time.Time), reads, mixed *atomic.Int64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for r := first; r < first+nearReaders; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nearReader(t, nc, r, oracle, tags, done, seen, reads, mixed)
		}()
	}
	return func() { close(done); wg.Wait() }
}

// TestNearChildReader is the child half of TestNearTwoProcesses; it runs
// only when that test starts it.
func TestNearChildReader(t *testing.T) {
	be := childBackend(t, envNearChild, "TestNearTwoProcesses")
	_, oracle, tags := flipVersions(t)
	nc := newNearCache(t, nearClient(t, be), os.Getenv(envNearPrefix), Options{})
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	seen := func(r int, v string, began, at time.Time) {
		mu.Lock()
		fmt.Fprintf(out, "seen %d %s %d %d\n", r, v, began.UnixNano(), at.UnixNano())
		out.Flush()
		mu.Unlock()
	}
	var reads, mixed atomic.Int64
	stop := startReaders(t, nc, 0, oracle, tags, seen, &reads, &mixed)
	_, _ = io.Copy(io.Discard, os.Stdin) // the parent closes stdin when done
	stop()
	mu.Lock()
	fmt.Fprintf(out, "done %d %d\n", reads.Load(), mixed.Load())
	out.Flush()
	mu.Unlock()
}

// TestNearTwoProcesses: 8 readers with near caches, 4 here and 4 in a
// child process, against a writer doing 200 refreshes between two
// versions. After each Refresh returns, every reader serves the new
// version within nearConverge; no line mixes versions, and no tier carries
// another version's gifts. Printed, p50/p99/max of: the stale window (how
// long after a Refresh returned a read could begin and still be served the
// old version; the 5 ms p99 floor on it is judged by the main job's
// convergence run, go run ./bench) and each reader's first new read.
func TestNearTwoProcesses(t *testing.T) {
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		ps, oracle, tags := flipVersions(t)
		writer := newCache(t, b, Options{})
		if _, err := writer.Refresh(ctx, ps[0]); err != nil {
			t.Fatal(err)
		}
		type state struct {
			version string
			at      time.Time
		}
		var mu sync.Mutex
		cond := sync.NewCond(&mu)
		states := make([]state, 2*nearReaders)
		logs := make([][]measure.Read, 2*nearReaders)
		seen := func(r int, v string, began, at time.Time) {
			mu.Lock()
			logs[r] = append(logs[r], measure.Read{Began: began, Version: v})
			if states[r].version != v {
				states[r] = state{v, at}
				cond.Broadcast()
			}
			mu.Unlock()
		}

		child := exec.Command(os.Args[0], "-test.run=^TestNearChildReader$", "-test.count=1")
		child.Env = testredis.ChildEnv(envNearChild+"="+b.Name, envNearPrefix+"="+b.Prefix)
		stdin, err := child.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		child.Stderr = os.Stderr
		stdout := testredis.StartChildPipe(t, child, child.StdoutPipe)
		var childReads, childMixed atomic.Int64
		childDone := make(chan struct{})
		go func() {
			defer close(childDone)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				switch {
				case len(f) == 5 && f[0] == "seen":
					r, _ := strconv.Atoi(f[1])
					began, _ := strconv.ParseInt(f[3], 10, 64)
					at, _ := strconv.ParseInt(f[4], 10, 64)
					seen(nearReaders+r, f[2], time.Unix(0, began), time.Unix(0, at))
				case len(f) == 3 && f[0] == "done":
					n, _ := strconv.ParseInt(f[1], 10, 64)
					m, _ := strconv.ParseInt(f[2], 10, 64)
					childReads.Store(n)
					childMixed.Store(m)
				}
			}
		}()

		nc := newNearCache(t, nearClient(t, b), b.Prefix, Options{})
		var reads, mixed atomic.Int64
		stop := startReaders(t, nc, 0, oracle, tags, seen, &reads, &mixed)
		// waitAll waits until every reader serves v (or the deadline).
		waitAll := func(v string) bool {
			deadline := time.AfterFunc(nearConverge, func() { mu.Lock(); cond.Broadcast(); mu.Unlock() })
			defer deadline.Stop()
			start := time.Now()
			mu.Lock()
			defer mu.Unlock()
			for {
				all := true
				for _, s := range states {
					all = all && s.version == v
				}
				if all {
					return true
				}
				if time.Since(start) >= nearConverge {
					return false
				}
				cond.Wait()
			}
		}
		v0, _ := Version(&ps[0], Options{})
		if !waitAll(v0) {
			t.Fatalf("readers never served the first version: %+v", states)
		}
		var lat []time.Duration
		var writes []measure.Write
		for i := 1; i <= nearRefreshes; i++ {
			p := ps[i%2]
			sent := time.Now()
			rep, err := writer.Refresh(ctx, p)
			if err != nil || rep.Updated != 1 {
				t.Fatalf("refresh %d: %+v %v", i, rep, err)
			}
			returned := time.Now()
			v := rep.Promotions[0].Version
			writes = append(writes, measure.Write{Sent: sent, Returned: returned, Version: v})
			if !waitAll(v) {
				t.Fatalf("refresh %d: not every reader served %s within %v: %+v", i, v, nearConverge, states)
			}
			mu.Lock()
			for _, s := range states {
				lat = append(lat, max(0, s.at.Sub(returned)))
			}
			mu.Unlock()
		}
		stop()
		_ = stdin.Close()
		<-childDone
		if err := child.Wait(); err != nil {
			t.Fatalf("child: %v", err)
		}
		mu.Lock()
		stale := measure.StaleWindows(writes, logs)
		mu.Unlock()
		pct := func(d []time.Duration) string {
			slices.Sort(d)
			return fmt.Sprintf("p50 %v p99 %v max %v", measure.Quantile(d, 0.5), measure.Quantile(d, 0.99), d[len(d)-1])
		}
		st := nc.NearStats()
		t.Logf("%d refreshes × %d readers: stale window %s; first new read (pause included) %s; line reads here %d (mixed %d), child %d (mixed %d); near hits here %d, misses %d",
			nearRefreshes, len(states), pct(stale), pct(lat), reads.Load(), mixed.Load(), childReads.Load(), childMixed.Load(), st.Hits, st.Misses)
		if mixed.Load() != 0 || childMixed.Load() != 0 {
			t.Fatalf("mixed reads: %d here, %d in the child", mixed.Load(), childMixed.Load())
		}
		if childReads.Load() == 0 {
			t.Fatal("the child reported no reads")
		}
	})
}
