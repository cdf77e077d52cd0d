package delay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/testredis"
)

// gate is a client hook that holds the first `hold` script calls (single
// commands) until open is closed, counts the script pipelines that go
// through,
// and fails them while failPipe is set: how the group tests line up
// calls behind ones in flight without timing.
type gate struct {
	hold     int32
	held     atomic.Int32
	entered  chan struct{}
	open     chan struct{}
	pipes    atomic.Int32
	failPipe atomic.Bool
}

var errInjected = errors.New("injected transport failure")

func newGate(hold int) *gate {
	return &gate{hold: int32(hold), entered: make(chan struct{}, hold), open: make(chan struct{})}
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" && g.held.Add(1) <= g.hold {
			g.entered <- struct{}{}
			<-g.open
		}
		return next(ctx, cmd)
	}
}

func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if cmds[0].Name() != "evalsha" {
			return next(ctx, cmds) // a new connection's handshake
		}
		g.pipes.Add(1)
		if g.failPipe.Load() {
			for _, c := range cmds {
				c.SetErr(errInjected)
			}
			return errInjected
		}
		return next(ctx, cmds)
	}
}

// lineUp starts two Enqueue calls that the gate holds on their way (the
// group's maxGroupFlying), then the jobs, each in its own goroutine, and
// returns once all of them wait in the group. res[i] and errs[i] are job
// i's outcome once wg is done; the two held calls are the last two.
func lineUp(t *testing.T, ctx context.Context, q *Queue, g *gate, jobs []Job, ctxs []context.Context) (res []Enqueued, errs []error, wg *sync.WaitGroup) {
	t.Helper()
	n := len(jobs)
	res, errs, wg = make([]Enqueued, n+maxGroupFlying), make([]error, n+maxGroupFlying), &sync.WaitGroup{}
	for k := 0; k < maxGroupFlying; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			res[n+k], errs[n+k] = q.Enqueue(ctx, Job{Key: fmt.Sprintf("held:%d", k)})
		}(k)
		<-g.entered
	}
	for i := range jobs {
		c := ctx
		if ctxs != nil && ctxs[i] != nil {
			c = ctxs[i]
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res[i], errs[i] = q.Enqueue(c, jobs[i])
		}(i)
	}
	waitQueued(t, q, n)
	return res, errs, wg
}

// TestEnqueueGroup: calls that arrive while others are on their way go
// together in one batch, with the outcome each would have had alone.
func TestEnqueueGroup(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		g := newGate(maxGroupFlying)
		b.Client.AddHook(g)
		q := newQ(t, b, Options{})

		const n = 60
		jobs := jobsOf(n, func(i int) Job {
			return Job{Key: fmt.Sprintf("order:%03d", i), Payload: []byte{byte(i)}, When: After(time.Hour)}
		})
		// the last two share (key, token): one task, one duplicate
		jobs[n-2] = Job{Key: "order:dup", Token: "t1", When: After(time.Hour)}
		jobs[n-1] = Job{Key: "order:dup", Token: "t1", When: After(2 * time.Hour)}
		// and job 0's ctx is cancelled while it waits: nothing of it is sent
		cctx, cancel := context.WithCancel(ctx)
		ctxs := make([]context.Context, n)
		ctxs[0] = cctx

		res, errs, wg := lineUp(t, ctx, q, g, jobs, ctxs)
		cancel()
		waitQueued(t, q, n-1) // the cancelled call has left
		close(g.open)
		wg.Wait()

		if !errors.Is(errs[0], context.Canceled) {
			t.Fatalf("cancelled while queued: err = %v, want context.Canceled", errs[0])
		}
		if got, _ := lookup(ctx, q, jobs[0].Key); len(got) != 0 {
			t.Fatalf("cancelled while queued: Lookup = %+v, want nothing written", got)
		}
		ids := map[string]bool{}
		dups := 0
		for i := 1; i < len(res); i++ {
			if errs[i] != nil {
				t.Fatalf("call %d: %v", i, errs[i])
			}
			if res[i].Duplicate {
				dups++
				continue
			}
			if ids[res[i].ID] {
				t.Fatalf("call %d: ID %s given twice", i, res[i].ID)
			}
			ids[res[i].ID] = true
			if res[i].State != StatePending || res[i].Due.IsZero() || res[i].Token == "" {
				t.Fatalf("call %d: outcome %+v", i, res[i])
			}
		}
		if dups != 1 || len(ids) != n+maxGroupFlying-2 {
			t.Fatalf("%d duplicates and %d tasks, want 1 and %d", dups, len(ids), n+maxGroupFlying-2)
		}
		if a, d := res[n-2], res[n-1]; a.ID != d.ID || !a.Due.Equal(d.Due) {
			t.Fatalf("duplicate pair: %+v and %+v, want one task, one due time", a, d)
		}
		// the held calls went alone; the 59 queued behind them went as one
		// batch: one pipeline
		if p := g.pipes.Load(); p != 1 {
			t.Fatalf("%d pipelines, want 1 batch for the queued calls", p)
		}
		st, err := q.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Pending != int64(len(ids)) {
			t.Fatalf("pending %d, want %d", st.Pending, len(ids))
		}
		for i, j := range jobs[1 : n-2] {
			got, err := lookup(ctx, q, j.Key)
			if err != nil || len(got) != 1 || got[0].ID != res[i+1].ID {
				t.Fatalf("Lookup(%q) = %+v, %v; want task %s", j.Key, got, err, res[i+1].ID)
			}
		}
	})
}

// waitQueued waits until exactly want calls wait in q's group.
func waitQueued(t *testing.T, q *Queue, want int) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("%d calls queued in the group", want), func() bool {
		q.group.mu.Lock()
		defer q.group.mu.Unlock()
		return len(q.group.pending) == want
	})
}

// TestEnqueueGroupTransportFailure: a batch that fails on the wire fails
// every call in it, with the transport's error, and writes nothing.
func TestEnqueueGroupTransportFailure(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		g := newGate(maxGroupFlying)
		b.Client.AddHook(g)
		q := newQ(t, b, Options{})
		jobs := jobsOf(20, func(i int) Job { return Job{Key: fmt.Sprintf("order:%03d", i)} })
		res, errs, wg := lineUp(t, ctx, q, g, jobs, nil)
		g.failPipe.Store(true)
		close(g.open)
		wg.Wait()
		for i := range jobs {
			if !errors.Is(errs[i], errInjected) || res[i].ID != "" {
				t.Fatalf("call %d: %+v, %v; want the injected failure", i, res[i], errs[i])
			}
			if got, _ := lookup(ctx, q, jobs[i].Key); len(got) != 0 {
				t.Fatalf("call %d: Lookup = %+v, want nothing written", i, got)
			}
		}
		for k := len(jobs); k < len(errs); k++ {
			if errs[k] != nil {
				t.Fatalf("held call %d (sent alone, before the failure): %v", k, errs[k])
			}
		}
	})
}

// TestEnqueueGroupConcurrent: many goroutines, no gate: every call gets
// its own task, and fewer script calls than Enqueue calls reach Redis.
func TestEnqueueGroupConcurrent(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		rt, err := testredis.CountRoundTrips(ctx, b.Client)
		if err != nil {
			t.Fatal(err)
		}
		q := newQ(t, b, Options{})
		const goroutines, each = 64, 40
		ids := make([][]string, goroutines)
		var wg sync.WaitGroup
		errc := make(chan error, goroutines)
		for gi := 0; gi < goroutines; gi++ {
			wg.Add(1)
			go func(gi int) {
				defer wg.Done()
				for k := 0; k < each; k++ {
					e, err := q.Enqueue(ctx, Job{Key: fmt.Sprintf("order:%02d:%02d", gi, k), When: After(time.Hour)})
					if err != nil {
						errc <- err
						return
					}
					ids[gi] = append(ids[gi], e.ID)
				}
			}(gi)
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, l := range ids {
			for _, id := range l {
				if seen[id] {
					t.Fatalf("ID %s given twice", id)
				}
				seen[id] = true
			}
		}
		st, err := q.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(seen) != goroutines*each || st.Pending != int64(goroutines*each) {
			t.Fatalf("%d IDs, %d pending; want %d", len(seen), st.Pending, goroutines*each)
		}
		// Round trips include Stats; grouping shows as far fewer than one a call.
		if trips := rt.Total(); trips >= goroutines*each {
			t.Fatalf("%d round trips for %d Enqueue calls: nothing was grouped", trips, goroutines*each)
		}
		t.Logf("%d Enqueue calls in %d round trips", goroutines*each, rt.Total())
	})
}

func TestBatchContext(t *testing.T) {
	t.Parallel()
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	soon, cancelSoon := context.WithTimeout(base, time.Hour)
	defer cancelSoon()
	later, cancelLater := context.WithTimeout(base, 2*time.Hour)
	defer cancelLater()
	dl := func(c context.Context) time.Time { d, _ := c.Deadline(); return d }
	cases := []struct {
		name string
		ctxs []context.Context
		want time.Time // zero: no deadline
	}{
		{"latest deadline", []context.Context{soon, later}, dl(later)},
		{"one without deadline", []context.Context{soon, base}, time.Time{}},
		{"first without deadline", []context.Context{base, later}, time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ws []*enqueueWait
			for _, c := range tc.ctxs {
				ws = append(ws, &enqueueWait{ctx: c})
			}
			ctx, cancel := batchContext(ws)
			defer cancel()
			got, ok := ctx.Deadline()
			if ok != !tc.want.IsZero() || !got.Equal(tc.want) {
				t.Fatalf("deadline %v %v, want %v", got, ok, tc.want)
			}
		})
	}
	// a member's cancellation does not reach the batch
	ctx, cancel := batchContext([]*enqueueWait{{ctx: soon}, {ctx: later}})
	defer cancel()
	cancelBase()
	if ctx.Err() != nil {
		t.Fatalf("batch ctx ended with its members' cancellation: %v", ctx.Err())
	}
}
