package delay

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/soak"
	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/internal/testrun"
)

// shHandled records every delivery a handler sees, and catches a task in
// two handlers at once.
type shHandled struct {
	mu     sync.Mutex
	active map[string]bool
	count  map[string]int
	order  []int // shard of each shHandled task, in handling order
	twice  int
}

func newShHandled() *shHandled { return &shHandled{active: map[string]bool{}, count: map[string]int{}} }

func (h *shHandled) begin(shard int, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := strconv.Itoa(shard) + "/" + id
	if h.active[k] {
		h.twice++
	}
	h.active[k] = true
	h.count[k]++
	h.order = append(h.order, shard)
}

func (h *shHandled) end(shard int, id string) {
	h.mu.Lock()
	delete(h.active, strconv.Itoa(shard)+"/"+id)
	h.mu.Unlock()
}

func (h *shHandled) total() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.order)
}

// shWaitFor polls cond (test-side only) until it holds or the deadline passes.
func shWaitFor(t *testing.T, d time.Duration, cond func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cond()
}

// TestShardWorkerFairDraining: one shard with a deep backlog does not
// starve the others: the shallow shards are drained completely while the
// deep one still has most of its backlog.
func TestShardWorkerFairDraining(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		s := shNew(t, b, "fair", 4, Options{})
		deep, shallow := soak.Pick(400, 200), soak.Pick(40, 20)
		perShard := shKeysPerShard(s, deep)
		var jobs []Job
		for i, keys := range perShard {
			if i != 0 {
				keys = keys[:shallow]
			}
			for _, k := range keys {
				jobs = append(jobs, Job{Key: k})
			}
		}
		if _, err := s.EnqueueBatch(ctx, jobs); err != nil {
			t.Fatalf("EnqueueBatch: %v", err)
		}
		h := newShHandled()
		w, err := newWorker(s, func(ctx context.Context, task *Task) error {
			sh := s.shardIndex(task.Key)
			h.begin(sh, task.ID)
			time.Sleep(time.Millisecond) // a handler that does some work
			h.end(sh, task.ID)
			return nil
		}, workerOpts{Concurrency: 2})
		if err != nil {
			t.Fatalf("NewShardedWorker: %v", err)
		}
		stop := testrun.Start(t, ctx, w.Run)
		total := deep + 3*shallow
		ok := shWaitFor(t, time.Minute, func() bool { return h.total() >= total })
		if err := stop(); !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
		if !ok {
			t.Fatalf("shHandled %d of %d tasks", h.total(), total)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		// When the last shallow task was shHandled, how much of the deep
		// shard had been shHandled?
		lastShallow, deepBefore := 0, 0
		for i, sh := range h.order {
			if sh != 0 {
				lastShallow = i
			}
		}
		for _, sh := range h.order[:lastShallow+1] {
			if sh == 0 {
				deepBefore++
			}
		}
		if deepBefore > deep/2 {
			t.Errorf("shallow shards finished only after %d of %d deep-shard tasks: they waited behind the backlog", deepBefore, deep)
		}
		if h.twice != 0 {
			t.Errorf("%d tasks were in two handlers at once", h.twice)
		}
		t.Logf("shallow shards done after %d of %d deep-shard tasks", deepBefore, deep)
	})
}

// TestShardNoLossEightConsumers: 8 consumers (8 sharded workers, as 8
// processes would run them) drain a stream of tasks produced while they
// run: every task is shHandled exactly once (leases never expire here, so
// a second delivery would be a bug), none is lost, and the shards end empty.
func TestShardNoLossEightConsumers(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		n := soak.Pick(2000, 500)
		if b.Real() {
			n = soak.Pick(6000, 1500)
		}
		s := shNew(t, b, "stream", 4, Options{})
		wakeClient := shBlockingClient(t, b)
		h := newShHandled()
		handler := func(ctx context.Context, task *Task) error {
			sh := s.shardIndex(task.Key)
			h.begin(sh, task.ID)
			h.end(sh, task.ID)
			return nil
		}
		rctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for range 8 {
			w, err := newWorker(s, handler, workerOpts{Concurrency: 2, WakeClient: wakeClient})
			if err != nil {
				t.Fatalf("NewShardedWorker: %v", err)
			}
			wg.Add(1)
			go func() { defer wg.Done(); _ = w.Run(rctx) }()
		}
		enqueued := map[string]bool{}
		for start := 0; start < n; start += 500 {
			jobs := make([]Job, 0, 500)
			for i := start; i < start+500; i++ {
				jobs = append(jobs, Job{Key: "stream-" + strconv.Itoa(i), Payload: []byte("p")})
			}
			res, err := s.EnqueueBatch(ctx, jobs)
			if err != nil {
				t.Fatalf("EnqueueBatch: %v", err)
			}
			for i, r := range res {
				if r.Err != nil {
					t.Fatalf("job %s: %v", jobs[i].Key, r.Err)
				}
				enqueued[strconv.Itoa(s.shardIndex(jobs[i].Key))+"/"+r.ID] = true
			}
		}
		ok := shWaitFor(t, time.Minute, func() bool { return h.total() >= n })
		// Give late duplicates a chance to show up before stopping.
		time.Sleep(100 * time.Millisecond)
		stop()
		wg.Wait()
		if !ok {
			t.Errorf("shHandled %d of %d", h.total(), n)
		}
		h.mu.Lock()
		lost, dup := 0, 0
		for k := range enqueued {
			switch c := h.count[k]; {
			case c == 0:
				lost++
			case c > 1:
				dup++
			}
		}
		extra := len(h.count) - len(enqueued)
		twice := h.twice
		h.mu.Unlock()
		if lost != 0 || dup != 0 || twice != 0 || extra != 0 || len(enqueued) != n {
			t.Errorf("enqueued %d: lost %d, shHandled more than once %d, at once in two handlers %d, unknown %d", len(enqueued), lost, dup, twice, extra)
		}
		stats, err := s.Stats(ctx)
		if err != nil {
			t.Fatalf("Stats: %v", err)
		}
		for i, st := range stats {
			if st.Pending != 0 || st.InFlight != 0 {
				t.Errorf("shard %d: pending %d in flight %d after draining", i, st.Pending, st.InFlight)
			}
		}
	})
}

// shBlockingClient returns a client with a large pool for the workers' BLPOP
// wake-ups (one blocked connection per shard per worker), closed at cleanup.
func shBlockingClient(t *testing.T, b *testredis.Backend) redis.UniversalClient {
	t.Helper()
	var c redis.UniversalClient
	switch bc := b.Client.(type) {
	case *redis.ClusterClient:
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: bc.Options().Addrs, PoolSize: 128, ContextTimeoutEnabled: true})
	case *redis.Client:
		o := bc.Options()
		c = redis.NewClient(&redis.Options{Addr: o.Addr, DB: o.DB, Username: o.Username, Password: o.Password, PoolSize: 128, ContextTimeoutEnabled: true})
	default:
		t.Fatalf("unexpected client type %T", b.Client)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
