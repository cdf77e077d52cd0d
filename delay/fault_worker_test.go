package delay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/soak"
	"github.com/tierset/tierset/internal/testredis"
)

// faultTasks is how many tasks each Worker run under a fault handles
// (5,000 under the soak switch, 1,500 by default), and faultRate how many
// are enqueued a second: paced, so that the run lasts about 4 s (1.2 s)
// and faults land all along it, not after a burst. A run goes on until its
// fault was applied as often as the test asks, whatever the count.
const faultRate = 1250

func faultTasks() int { return soak.Pick(5000, 1500) }

// faultRun is one Worker run under a fault: producers enqueue faultTasks
// tasks (half with a caller's token, all with one when the server goes
// down, so that a producer can re-send what failed), a Worker acks each,
// and inject runs every 200 ms until everything enqueued was handled.
type faultRun struct {
	c     redis.UniversalClient
	lease time.Duration
	// inject is the fault, run on the test goroutine; it reports whether
	// the run may end (the fault has been applied as often as it must).
	inject func(tick int) bool
	// down: the server itself goes away, so a call may fail without any
	// fault of the library; producers re-send, and such errors are counted
	// apart (an error is false only if the call took effect).
	down bool
}

// faultFigures is what a run counts.
type faultFigures struct {
	enqueued  int // Enqueue calls that returned success
	lost      int // enqueued with success, never handled
	twice     int // handled again before the previous delivery's lease ended, or one Enqueue made two tasks
	falseErrs int // errors (or Duplicate for its own write) returned for calls that took effect
	downErrs  int // true errors: calls that did not run (server down, or every send cut)
	// unknown counts calls whose every send lost its connection (an
	// outcome the caller cannot know; docs/design.md): Enqueue calls that
	// ran all the same, and the worker's takes and acks, which it re-sends
	unknown    int
	deliveries int
	faults     int
}

type faultObserver struct {
	NopObserver
	mu   sync.Mutex
	errs map[string][]error
}

func (o *faultObserver) OnError(_ string, op string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.errs[op] = append(o.errs[op], err)
}

type faultDelivery struct {
	id           string
	fence        int64
	at, deadline time.Time
}

func (r faultRun) run(t *testing.T) faultFigures {
	t.Helper()
	// A run is judged on what happened, not on how fast: a loaded machine
	// under -race produces and drains 5,000 tasks through 5 ms of added
	// latency in minutes rather than the schedule's 50 s, so the run gets
	// 5 minutes and fails only when no task is handled for a minute.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	obs := &faultObserver{errs: map[string][]error{}}
	lease := r.lease
	if lease == 0 {
		lease = 30 * time.Second
	}
	q, err := New(r.c, "fault", Options{Prefix: testredis.Prefix(t), Lease: lease, Observer: obsOf(obs)})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string][]faultDelivery{}
	var handled atomic.Int64
	wasHandled := func(key string) bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen[key]) > 0
	}
	h := func(_ context.Context, tk *Task) error {
		mu.Lock()
		if len(seen[tk.Key]) == 0 {
			handled.Add(1)
		}
		seen[tk.Key] = append(seen[tk.Key], faultDelivery{tk.ID, tk.lease.Fence, tk.DeliveredAt, tk.Deadline})
		mu.Unlock()
		return nil
	}
	w, err := newWorker(q, h, workerOpts{Concurrency: 16, BatchSize: 64, ReconnectMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()

	var f faultFigures
	var enqueued, falseErrs, downErrs, unknown atomic.Int64
	okKeys := make([]bool, faultTasks())
	var pwg sync.WaitGroup
	start := time.Now()
	produceBy := start.Add(4 * time.Minute)
	for p := range 8 {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			for i := p; i < faultTasks(); i += 8 {
				sleepCtx(ctx, time.Until(start.Add(time.Duration(i)*time.Second/faultRate)))
				j := Job{Key: fmt.Sprintf("order:%05d", i)}
				if r.down || i%2 == 0 {
					j.Token = "expire"
				}
				for attempt := 0; time.Now().Before(produceBy); attempt++ {
					e, err := q.Enqueue(ctx, j)
					switch {
					case err == nil && e.Duplicate && attempt == 0:
						falseErrs.Add(1) // its own write reported as a duplicate
					case err == nil:
						okKeys[i] = true
						enqueued.Add(1)
					case r.down && errors.Is(err, ErrRedis):
						downErrs.Add(1)
						sleepCtx(ctx, 20*time.Millisecond) // the server is restarting: a producer's backoff
						continue
					case errors.Is(err, ErrRedis) && !isRedisReplyErr(err):
						// no send got a reply (go-redis's retries each met a
						// killed connection): the outcome is unknown, as the
						// fault model says, and Lookup tells it
						if !tookEffect(ctx, q, j.Key, produceBy, wasHandled) {
							downErrs.Add(1) // it did not run: send again
							continue
						}
						unknown.Add(1)
						okKeys[i] = true
						enqueued.Add(1)
					default:
						falseErrs.Add(1)
						t.Errorf("Enqueue %s: %v", j.Key, err)
					}
					break
				}
			}
		}()
	}
	produced := make(chan struct{})
	go func() { pwg.Wait(); close(produced) }()

	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	lastHandled, moved := int64(-1), time.Now()
	faultDone := false
loop:
	for n := 1; ; n++ {
		<-tick.C
		if h := handled.Load(); h != lastHandled {
			lastHandled, moved = h, time.Now()
		}
		select {
		case <-produced:
			if faultDone && handled.Load() >= enqueued.Load() {
				st, err := q.Stats(ctx)
				if err == nil && st.Pending == 0 && st.InFlight == 0 {
					break loop
				}
			}
		default:
		}
		if time.Since(moved) > time.Minute || ctx.Err() != nil {
			t.Errorf("run stuck (no task handled for a minute, or out of its 5 minutes): %d of %d enqueued handled", handled.Load(), enqueued.Load())
			break
		}
		if !faultDone || handled.Load() < enqueued.Load() {
			f.faults++
			faultDone = r.inject(n) || faultDone
		}
	}
	stop()
	if err := <-ran; !errors.Is(err, context.Canceled) {
		t.Errorf("Worker.Run: %v", err)
	}
	<-produced

	f.enqueued = int(enqueued.Load())
	f.falseErrs = int(falseErrs.Load())
	f.downErrs = int(downErrs.Load())
	f.unknown = int(unknown.Load())
	mu.Lock()
	defer mu.Unlock()
	for i, ok := range okKeys {
		key := fmt.Sprintf("order:%05d", i)
		ds := seen[key]
		f.deliveries += len(ds)
		if ok && len(ds) == 0 {
			f.lost++
		}
		ids := map[string]bool{}
		sort.Slice(ds, func(a, b int) bool { return ds[a].at.Before(ds[b].at) })
		twice := f.twice
		for k, d := range ds {
			ids[d.id] = true
			if k > 0 && d.id == ds[k-1].id && d.at.Before(ds[k-1].deadline) {
				f.twice++
			}
		}
		f.twice += len(ids) - min(len(ids), 1)
		if f.twice > twice {
			// what a failure needs to be told from a judgment error:
			// IDs, fences and both ends of each lease (Redis clock)
			t.Logf("%s handled %d times: %+v", key, len(ds), ds)
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	for op, errs := range obs.errs {
		for _, err := range errs {
			switch {
			case op == "wake":
				// the BLPOP that only wakes the worker early: no operation
			case r.down && errors.Is(err, ErrRedis) && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrLeaseLost):
				f.downErrs++
			case errors.Is(err, ErrRedis) && !isRedisReplyErr(err):
				// no send of a take or ack got a reply (each met a killed
				// connection): the worker sends the same call again, and
				// lost and twice above count what that left behind
				f.unknown++
			default:
				f.falseErrs++
				t.Errorf("worker %s: %v", op, err)
			}
		}
	}
	return f
}

func (f faultFigures) check(t *testing.T, what string) {
	t.Helper()
	t.Logf("%s: %d tasks enqueued, %d deliveries, %d faults injected: lost %d, handled twice without a lease expiry %d, false errors %d (errors of calls that did not run: %d; with every send cut: %d)",
		what, f.enqueued, f.deliveries, f.faults, f.lost, f.twice, f.falseErrs, f.downErrs, f.unknown)
	if f.lost != 0 || f.twice != 0 || f.falseErrs != 0 {
		t.Errorf("%s: lost %d, twice %d, false errors %d: want 0, 0, 0", what, f.lost, f.twice, f.falseErrs)
	}
	if f.enqueued != faultTasks() {
		t.Errorf("%s: %d of %d tasks enqueued", what, f.enqueued, faultTasks())
	}
}

// TestFaultWorkerCutReplies: a reply cut every 200 ms, whichever script it
// belongs to (enqueue, take, ack, sweep); go-redis re-sends each.
func TestFaultWorkerCutReplies(t *testing.T) {
	t.Parallel()
	env := newFaultEnv(t)
	f := faultRun{c: env.c, inject: func(int) bool {
		env.proxy.CutNext(1, faultproxy.Contains("evalsha"))
		return env.proxy.Cuts() >= 5
	}}.run(t)
	f.faults = int(env.proxy.Cuts())
	f.check(t, "a reply cut every 200 ms")
}

// TestFaultWorkerClientKill: CLIENT KILL TYPE normal every 200 ms on a
// private server, which drops every connection of the queue's client
// (the killing client is spared: SKIPME).
func TestFaultWorkerClientKill(t *testing.T) {
	t.Parallel()
	env := newFaultEnv(t)
	ctx := testCtx(t)
	c := env.srv.Client(&redis.Options{ContextTimeoutEnabled: true})
	var killed int64
	f := faultRun{c: c, inject: func(int) bool {
		n, err := env.direct.ClientKillByFilter(ctx, "TYPE", "normal").Result()
		if err != nil {
			t.Errorf("CLIENT KILL: %v", err)
		}
		killed += n
		return killed >= 5
	}}.run(t)
	t.Logf("%d connections killed", killed)
	f.check(t, "CLIENT KILL TYPE normal every 200 ms")
}

// TestFaultWorkerRestarts: the server is killed (SIGKILL) and started
// again twice during the run, with appendfsync always, so every write
// acknowledged before a crash survives it. An Enqueue that failed may or
// may not have landed: the producer re-sends it with its token, and it
// counts as lost only if an Enqueue of it returned success.
func TestFaultWorkerRestarts(t *testing.T) {
	t.Parallel()
	env := newFaultEnv(t, "--appendonly", "yes", "--appendfsync", "always")
	c := env.srv.Client(&redis.Options{ContextTimeoutEnabled: true})
	restarts := 0
	f := faultRun{c: c, lease: 5 * time.Second, down: true, inject: func(tick int) bool {
		if restarts < 2 && tick%4 == 0 {
			env.srv.Restart()
			restarts++
		}
		return restarts == 2
	}}.run(t)
	f.faults = restarts
	f.check(t, "two restarts (appendfsync always)")
}

// TestFaultWorkerLatency: 5 ms added to every reply.
func TestFaultWorkerLatency(t *testing.T) {
	t.Parallel()
	env := newFaultEnv(t)
	env.proxy.SetLatency(5 * time.Millisecond)
	f := faultRun{c: env.c, inject: func(int) bool { return true }}.run(t)
	f.faults = 0 // the latency is on all along
	f.check(t, "5 ms of added latency")
}

// tookEffect reports whether an Enqueue of key that returned an error ran
// after all, asking until an answer comes (or until by): key has a task
// now, or handled(key) says the worker already ran one. The order
// matters: a task that Lookup no longer finds was acked, and its handler
// returned before the ack, so handled, read after Lookup, knows it. Lookup
// alone would call a task handled and acked between the Enqueue and the
// Lookup "never ran", and the producer's re-send would make it twice
// (TestFaultUnknownEnqueueJudged).
func tookEffect(ctx context.Context, q *Queue, key string, by time.Time, handled func(key string) bool) bool {
	for time.Now().Before(by) {
		infos, err := lookup(ctx, q, key)
		if err == nil {
			return len(infos) > 0 || handled(key)
		}
		sleepCtx(ctx, 10*time.Millisecond)
	}
	return true // unknown: counted as the error it may be
}

// TestFaultUnknownEnqueueJudged: an Enqueue whose every send lost its
// reply ran, and its task was handled and acked before the producer asked;
// Lookup then finds nothing, yet tookEffect must say it ran, or the fault
// runs above re-send it and count the re-send's task as handled twice.
func TestFaultUnknownEnqueueJudged(t *testing.T) {
	t.Parallel()
	env := newFaultEnv(t)
	ctx := testCtx(t)
	loadScripts(t, ctx, env.direct) // a cut EVALSHA is then one that ran
	q, err := New(env.c, "judged", Options{Prefix: testredis.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	var handled atomic.Int64
	w, err := newWorker(q, func(context.Context, *Task) error { handled.Add(1); return nil }, workerOpts{})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	t.Cleanup(func() { stop(); <-ran })

	// every send go-redis makes of the one Enqueue (MaxRetries 3: 4 sends)
	enq := [][]byte{[]byte(scriptEnqueue.Hash()), []byte(scriptEnqueue.Hash())}
	env.proxy.CutNext(4, func(req []byte) bool {
		return bytes.Contains(req, enq[0]) || bytes.Contains(req, enq[1])
	})
	_, err = q.Enqueue(ctx, Job{Key: "order:1"})
	if err == nil || !errors.Is(err, ErrRedis) || isRedisReplyErr(err) || env.proxy.Armed() != 0 {
		t.Fatalf("Enqueue with every send cut: %v, %d cuts left; want a transport error after 4 cuts", err, env.proxy.Armed())
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		st, err := q.Stats(ctx)
		if err == nil && handled.Load() == 1 && st.Pending == 0 && st.InFlight == 0 {
			break // handled and acked
		}
		if time.Now().After(deadline) {
			t.Fatalf("task not handled and acked in 20 s: handled %d, stats %+v, %v", handled.Load(), st, err)
		}
		sleepCtx(ctx, 5*time.Millisecond)
	}
	if infos, err := lookup(ctx, q, "order:1"); err != nil || len(infos) != 0 {
		t.Fatalf("Lookup after the ack: %+v, %v; want nothing", infos, err)
	}
	if !tookEffect(ctx, q, "order:1", time.Now().Add(10*time.Second), func(string) bool { return handled.Load() > 0 }) {
		t.Error("tookEffect: an Enqueue that ran and was handled judged as never run")
	}
}
