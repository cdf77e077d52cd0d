package e2e_test

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset"
	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/slot"
	"github.com/tierset/tierset/internal/testredis"
)

// TestFaultNearFailover kills (SIGKILL) the master that holds a promotion
// under a near cache, on the test's own 3+3 cluster, while readers match
// it and a writer keeps writing new versions (retrying until the promoted
// replica accepts them). No read is served a version that a write had
// replaced more than NearCacheOptions.MaxStaleness before the read
// started; the loss of the dead master's tracking connection is seen;
// after the failover the near cache tracks the new master and answers
// from memory again.
func TestFaultNearFailover(t *testing.T) {
	cl := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	prefix := testredis.Prefix(t)
	wc, rc := tierset.NewClusterClient(cl.seeds...), tierset.NewClusterClient(cl.seeds...)
	t.Cleanup(func() { _ = wc.Close(); _ = rc.Close() })
	w, err := cache.New(wc, cache.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	const maxStale = time.Second
	nc, err := cache.New(rc, cache.Options{Prefix: prefix, NearCache: &cache.NearCacheOptions{MaxStaleness: maxStale}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	version := func(k int) gradient.Promotion {
		p := foPromotion("nearfo")
		p.Tiers[1].Reward.Percent = decimal.NewFromInt(int64(1 + k))
		return p
	}
	var mu sync.Mutex
	versions := map[string]int{}
	var returned []time.Time
	write := func(k int) bool {
		rep, err := w.Refresh(ctx, version(k))
		if err != nil {
			return false
		}
		mu.Lock()
		versions[rep.Promotions[0].Version] = len(returned)
		returned = append(returned, time.Now())
		mu.Unlock()
		return true
	}
	if !write(0) {
		t.Fatal("first write failed")
	}
	waitFor := func(what string, d time.Duration, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(d)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v", what, d)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	read := func() cache.Result {
		r, _ := nc.Match(ctx, cache.QuantityQuery("nearfo", 5), cache.MatchOptions{})
		return r
	}
	held := func() bool { h := nc.NearStats().Hits; read(); return nc.NearStats().Hits > h }
	waitFor("tracking and a near hit", 10*time.Second, held)

	type rd struct {
		start   time.Time
		version string
	}
	var reads []rd
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []rd
			for {
				select {
				case <-stop:
					mu.Lock()
					reads = append(reads, mine...)
					mu.Unlock()
					return
				default:
				}
				s := time.Now()
				if r := read(); r.Err == nil {
					mine = append(mine, rd{s, r.Version})
				}
				time.Sleep(100 * time.Microsecond) // a handler between carts
			}
		}()
	}
	victim := slotOwners(t, ctx, wc)(slot.Of(prefix + ":{p:nearfo}:tiers"))
	pid := masterPID(t, ctx, wc, cl, victim)
	killPID(t, pid)
	killAt := time.Now()
	k := 1
	for ; k <= 5; k++ { // keep writing: the first writes after the kill fail until the replica takes over
		waitFor("a write after the kill", 30*time.Second, func() bool { return write(k) })
	}
	recovered := time.Since(killAt)
	waitFor("tracking of the new master and a near hit", 15*time.Second, held)
	close(stop)
	wg.Wait()

	worst, stale := time.Duration(0), 0
	for _, r := range reads {
		i, ok := versions[r.version]
		latest := sort.Search(len(returned), func(j int) bool { return returned[j].After(r.start) }) - 1
		if ok && i < latest {
			stale++
			worst = max(worst, r.start.Sub(returned[i+1]))
		}
	}
	st := nc.NearStats()
	t.Logf("killed %s; writes recovered after %v; %d reads, %d served a replaced version, worst %v (bound %v); tracking lost %d times; %+v",
		victim, recovered.Round(time.Millisecond), len(reads), stale, worst, maxStale, st.TrackingLost, st)
	if worst >= maxStale {
		t.Fatalf("a read was served a version replaced %v before it started (bound %v)", worst, maxStale)
	}
	if st.TrackingLost == 0 {
		t.Fatal("the dead master's tracking loss was never seen")
	}
}
