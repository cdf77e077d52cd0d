package delay

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/testredis"
)

// Check on the test backends: miniredis and the shared server either
// answer (a policy that keeps the queue's keys) or refuse CONFIG, which
// is a warning and never an error.
func TestCheck(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		obs := &lossRecorder{}
		q := newQ(t, b, Options{Observer: obsOf(obs)})
		res, err := q.Check(ctx)
		if err != nil {
			t.Fatalf("check: %v", err)
		}
		t.Logf("%s: %+v", b.Name, res)
		switch {
		case res.Known && res.Warning == nil && strings.HasPrefix(res.Policy, "allkeys-"):
			t.Errorf("allkeys policy %q passed without a warning", res.Policy)
		case !res.Known && !errors.Is(res.Warning, ErrConfigUnavailable):
			t.Errorf("unknown policy without ErrConfigUnavailable: %+v", res)
		case res.Warning != nil && obs.Warnings.Load() != 1:
			t.Errorf("warning %v not sent to the observer", res.Warning)
		}
	})
}

// The eviction policies, on private servers: allkeys-* is refused (by
// Check and so by Worker.Run) unless Options.AllowEviction, which warns;
// volatile-* and noeviction pass; a server that refuses CONFIG is a warning.
func TestFaultEvictionPolicy(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args    []string
		allow   bool
		wantErr error
		warn    error
	}{
		{args: []string{"--maxmemory-policy", "allkeys-lru"}, wantErr: ErrEvictionPolicy},
		{args: []string{"--maxmemory-policy", "allkeys-random"}, wantErr: ErrEvictionPolicy},
		{args: []string{"--maxmemory-policy", "allkeys-lfu"}, allow: true, warn: ErrEvictionPolicy},
		{args: []string{"--maxmemory-policy", "volatile-lru"}},
		{args: []string{"--maxmemory-policy", "noeviction"}},
		{args: []string{"--rename-command", "CONFIG", ""}, warn: ErrConfigUnavailable},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " ")+" allow="+strconv.FormatBool(c.allow), func(t *testing.T) {
			ctx := testCtx(t)
			s := testredis.StartServer(t, c.args...)
			obs := &lossRecorder{}
			q, err := New(s.Client(nil), "policy", Options{Observer: obsOf(obs), AllowEviction: c.allow})
			if err != nil {
				t.Fatal(err)
			}
			res, err := q.Check(ctx)
			if !errors.Is(err, c.wantErr) || (c.wantErr == nil && err != nil) {
				t.Fatalf("check: %+v %v, want %v", res, err, c.wantErr)
			}
			if !errors.Is(res.Warning, c.warn) || (c.warn == nil && res.Warning != nil) {
				t.Errorf("warning %v, want %v", res.Warning, c.warn)
			}
			if want := int64(0); c.warn != nil && obs.Warnings.Load() != 1 || c.warn == nil && obs.Warnings.Load() != want {
				t.Errorf("observer warnings %d", obs.Warnings.Load())
			}
			// the worker runs the same check before its first take
			w, err := newWorker(q, func(context.Context, *Task) error { return nil }, workerOpts{})
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			err = w.Run(rctx)
			if c.wantErr != nil && !errors.Is(err, c.wantErr) {
				t.Errorf("worker ran on %v: %v", c.args, err)
			}
			if c.wantErr == nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("worker: %v, want it to run until its ctx ended", err)
			}
		})
	}
}

// A real allkeys-lru server with a small maxmemory evicts queue keys under
// memory pressure. The loss is detected and reported, and Reconcile from
// the source puts every task back: 0 lost, 0 handled twice, 0 false errors.
func TestFaultEvictionLoss(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := testredis.StartServer(t, "--maxmemory", "4mb", "--maxmemory-policy", "allkeys-lru")
	c := s.Client(nil)
	obs := &lossRecorder{}
	q, err := New(c, "evict", Options{Observer: obsOf(obs), AllowEviction: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Check(ctx); err != nil || obs.Warnings.Load() != 1 {
		t.Fatalf("check with AllowEviction: %v, %d warnings", err, obs.Warnings.Load())
	}
	past := time.Now().Add(-time.Minute)
	payload := []byte(strings.Repeat("x", 1000))
	var src []Job
	var jobs []Job
	for i := range 1500 {
		st := Job{Key: "order:" + strconv.Itoa(i), Token: "pay", When: At(past), Payload: payload}
		src = append(src, st)
		jobs = append(jobs, Job{Key: st.Key, Token: st.Token, Payload: st.Payload, When: At(st.At)})
	}
	out, err := q.EnqueueBatch(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	buckets := map[string]bool{}
	for _, e := range out {
		if e.Err != nil {
			t.Fatal(e.Err)
		}
		buckets[q.k.taskBucket(e.ID)] = true
	}
	watched := []string{q.k.due, q.k.idx, q.k.ctr}
	for k := range buckets {
		watched = append(watched, k)
	}
	// newer keys push the queue's (least recently used) out
	ballast := strings.Repeat("b", 8<<10)
	n, missing := 0, int64(0)
	for ; n < 4000 && missing == 0; n++ {
		if err := c.Set(ctx, "ballast:"+strconv.Itoa(n), ballast, 0).Err(); err != nil {
			t.Fatalf("ballast: %v", err)
		}
		if n%50 == 49 {
			left, err := c.Exists(ctx, watched...).Result()
			if err != nil {
				t.Fatal(err)
			}
			missing = int64(len(watched)) - left
		}
	}
	if missing == 0 {
		t.Fatalf("no queue key evicted after %d ballast keys", n)
	}
	var gone []string
	for _, k := range []string{q.k.due, q.k.idx, q.k.ctr, q.k.stats} {
		if c.Exists(ctx, k).Val() == 0 {
			gone = append(gone, k[strings.LastIndexByte(k, ':')+1:])
		}
	}
	evicted := c.Info(ctx, "stats").Val()
	if i := strings.Index(evicted, "evicted_keys:"); i >= 0 {
		evicted = strings.Fields(evicted[i:])[0]
	}
	// the pressure ends (the ballast goes and the operator lifts the
	// limit), then the queue is used as usual; under a limit still hit,
	// recovery would be evicted in turn (reported, but not restorable)
	if err := c.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 500 {
		var ks []string
		for j := i; j < min(i+500, n); j++ {
			ks = append(ks, "ballast:"+strconv.Itoa(j))
		}
		c.Del(ctx, ks...)
	}
	// The queue is used as usual: an enqueue while it holds tasks finds a
	// lost index or counter (a lost record or due entry shows in the
	// drain); with only the index gone and nothing enqueued, nothing was
	// lost and nothing would be reported.
	if _, err := q.EnqueueBatch(ctx, jobs[:1]); err != nil {
		t.Fatalf("enqueue after the eviction: %v", err)
	}
	f := newTally()
	f.drain(t, ctx, q, true)
	rep, err := q.Reconcile(ctx, &sliceSource{tasks: f.open(src)}, time.Now(), ReconcileOptions{KeepExtra: true})
	if err != nil {
		f.falseErrors++
		t.Fatalf("reconcile: %v", err)
	}
	f.drain(t, ctx, q, true)
	t.Logf("%d of %d watched queue keys evicted (%s; %s) after %d ballast keys; reconcile %+v; observer %v",
		missing, len(watched), strings.Join(gone, ","), evicted, n, rep, obs.losses)
	if obs.Losses.Load() == 0 {
		t.Errorf("queue keys were evicted and nothing was reported")
	}
	f.report(t, "allkeys-lru eviction", src)
}

// Under a volatile-* policy, keys with a TTL are what the server evicts
// first, and a cache sharing the server fills it with them. Every reply of
// an Enqueue is cut after the server ran it, so go-redis sends the call
// again; the call's kept reply (no TTL, reply.lua) must still be there,
// so each call makes exactly one task while the cache's keys are evicted
// around it.
func TestFaultVolatileEvictionKeepsReplies(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"volatile-lru", "volatile-ttl"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			env := newFaultEnv(t, "--maxmemory", "6mb", "--maxmemory-policy", policy)
			// 1,000 calls, each with a reconnect and go-redis's backoff: about
			// 25 s, several times that on a loaded machine
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			t.Cleanup(cancel)
			loadScripts(t, ctx, env.direct)
			q, err := New(env.c, "volatile", Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res, err := q.Check(ctx); err != nil || res.Warning != nil {
				t.Fatalf("check under %s: %+v %v, want it accepted", policy, res, err)
			}
			// the cache: large values with a TTL longer than ReplyTTL, so
			// volatile-ttl would pick a reply first and volatile-lru meets
			// one in few samples; its writes keep the server at maxmemory
			// and evict many keys between a cut reply and its re-send (one
			// cache write before each call is too few: the bug this test
			// guards against then passes)
			stop := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				val := strings.Repeat("c", 16<<10)
				for i := 0; ; i++ {
					select {
					case <-stop:
						done <- nil
						return
					default:
					}
					if err := env.direct.Set(ctx, "cache:"+strconv.Itoa(i), val, time.Hour).Err(); err != nil {
						done <- err
						return
					}
				}
			}()
			evictedBefore := evictedKeys(t, ctx, env.direct)
			const calls = 1000
			for i := range calls {
				env.proxy.CutNext(1, faultproxy.Contains("evalsha"))
				e, err := q.Enqueue(ctx, Job{Key: "order:" + strconv.Itoa(i)})
				if err != nil || e.Duplicate {
					close(stop)
					<-done
					t.Fatalf("call %d: %+v %v, want a new task", i, e, err)
				}
			}
			close(stop)
			if err := <-done; err != nil {
				t.Fatalf("cache writer: %v", err)
			}
			if cuts := env.proxy.Cuts(); cuts != calls {
				t.Fatalf("%d replies cut, want %d", cuts, calls)
			}
			evicted := evictedKeys(t, ctx, env.direct) - evictedBefore
			if evicted == 0 {
				t.Fatal("no key evicted: no memory pressure, nothing proven")
			}
			tasks, err := env.direct.ZCard(ctx, q.k.due).Result()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d calls, %d replies cut, %d keys evicted meanwhile, %d tasks", policy, calls, env.proxy.Cuts(), evicted, tasks)
			if tasks != calls {
				t.Errorf("%d tasks after %d calls (one reply cut on each), want one a call", tasks, calls)
			}
			for i := range calls {
				lookupOne(t, ctx, q, "order:"+strconv.Itoa(i))
			}
		})
	}
}

// evictedKeys is INFO stats evicted_keys.
func evictedKeys(t *testing.T, ctx context.Context, c *redis.Client) int64 {
	t.Helper()
	info, err := c.InfoMap(ctx, "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(info["Stats"]["evicted_keys"], 10, 64)
	if err != nil {
		t.Fatalf("INFO stats evicted_keys: %v", err)
	}
	return n
}
