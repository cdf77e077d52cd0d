package delay

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

// lossRecorder is a Recorder that also keeps the errors OnLoss and
// OnWarning got, to tell which loss was reported.
type lossRecorder struct {
	Recorder
	mu       sync.Mutex
	losses   map[error]int
	warnings []error
}

func (r *lossRecorder) OnLoss(q string, err error, n int) {
	r.Recorder.OnLoss(q, err, n)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.losses == nil {
		r.losses = map[error]int{}
	}
	for _, s := range []error{ErrCounterLost, ErrIndexLost, ErrRecordLost, ErrDueLost} {
		if errors.Is(err, s) {
			r.losses[s] += n
		}
	}
}

func (r *lossRecorder) OnWarning(q string, err error) {
	r.Recorder.OnWarning(q, err)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.warnings = append(r.warnings, err)
}

func (r *lossRecorder) lost(s error) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.losses[s]
}

// faultTally counts what a fault run must keep at zero.
type faultTally struct {
	delivered   map[string]int  // deliveries per business key
	expired     map[string]bool // keys whose lease was let expire (a second delivery is allowed)
	acked       map[string]bool
	falseErrors int
}

func newTally() *faultTally {
	return &faultTally{delivered: map[string]int{}, expired: map[string]bool{}, acked: map[string]bool{}}
}

// ack acks tasks; an ack that fails is a false error (each took effect
// or the lease is held).
func (f *faultTally) ack(t *testing.T, ctx context.Context, q *Queue, tasks []*Task) {
	t.Helper()
	errs, err := q.ackTasks(ctx, tasks)
	if err != nil {
		t.Fatalf("ack: %v", err)
	}
	for i, e := range errs {
		if e != nil {
			f.falseErrors++
			t.Errorf("ack %s: %v", tasks[i].ID, e)
			continue
		}
		f.acked[tasks[i].Key] = true
	}
}

// drain takes and acks until nothing is due. lostOK accepts a take that
// reports IDs without their record (ErrRecordLost, the fault under test);
// any other error is a false error.
func (f *faultTally) drain(t *testing.T, ctx context.Context, q *Queue, lostOK bool) {
	t.Helper()
	for {
		bt, err := q.takeN(ctx, MaxBatch)
		if err != nil && !(lostOK && errors.Is(err, ErrRecordLost)) {
			f.falseErrors++
			t.Fatalf("drain: %v", err)
		}
		if len(bt.Tasks) == 0 && bt.Lost == 0 {
			return
		}
		f.take(bt)
		f.ack(t, ctx, q, bt.Tasks)
	}
}

// open is what the source still lists: the tasks of src not acked yet.
func (f *faultTally) open(src []Job) []Job {
	var out []Job
	for _, s := range src {
		if !f.acked[s.Key] {
			out = append(out, s)
		}
	}
	return out
}

func (f *faultTally) take(b takeBatch) {
	for _, tk := range b.Tasks {
		f.delivered[tk.Key]++
	}
}

// report prints and checks the figures over the keys the source holds.
func (f *faultTally) report(t *testing.T, name string, src []Job) {
	t.Helper()
	lost, twice := 0, 0
	for _, s := range src {
		switch n := f.delivered[s.Key]; {
		case n == 0:
			lost++
		case n > 1 && !f.expired[s.Key]:
			twice++
		}
	}
	t.Logf("%s: tasks lost %d, handled twice %d, false errors %d (of %d)", name, lost, twice, f.falseErrors, len(src))
	if lost+twice+f.falseErrors != 0 {
		t.Errorf("%s: tasks lost %d, handled twice %d, false errors %d: want all 0", name, lost, twice, f.falseErrors)
	}
}

// keyLoss runs one lost-key case: 40 tasks of a source (5 taken and held),
// one key deleted as eviction or a stray DEL would, then the queue used as
// usual (an enqueue, takes, sweeps, acks) and Reconcile from the source.
// Every task must end delivered, none twice without a lease expiry between,
// the loss reported in Stats, to the Observer and in the dead set or the
// call's result, and no record overwritten.
func keyLoss(t *testing.T, b *testredis.Backend, kind string) {
	ctx := testCtx(t)
	obs := &lossRecorder{}
	q, err := New(b.Client, "loss-"+kind, Options{Prefix: b.Prefix, Observer: obsOf(obs), Lease: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Minute)
	var src []Job
	var jobs []Job
	for i := range 40 {
		st := Job{Key: "order:" + strconv.Itoa(i), Token: "pay", When: At(past), Payload: []byte("p" + strconv.Itoa(i))}
		src = append(src, st)
		jobs = append(jobs, Job{Key: st.Key, Token: st.Token, Payload: st.Payload, When: At(st.At)})
	}
	out, err := q.EnqueueBatch(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	ids, idList := map[string]bool{}, []string{}
	for _, e := range out {
		if e.Err != nil {
			t.Fatal(e.Err)
		}
		ids[e.ID] = true
		idList = append(idList, e.ID)
	}
	f := newTally()
	held := mustTake(t, ctx, q, 5)
	f.take(held)
	before, err := q.records(ctx, idList)
	if err != nil {
		t.Fatal(err)
	}

	var gone string
	switch kind {
	case "ctr":
		gone = q.k.ctr
	case "bucket":
		gone = q.k.taskBucket("1") // IDs 1..z: the 5 held and 30 pending
	case "due":
		gone = q.k.due
	case "idx":
		gone = q.k.idx
	}
	if n := b.Client.Del(ctx, gone).Val(); n != 1 {
		t.Fatalf("DEL %s removed %d keys", gone, n)
	}

	// a new task: never an existing ID, never an overwritten record
	e, err := q.Enqueue(ctx, Job{Key: "new", Token: "n1", When: At(past)})
	if err != nil {
		f.falseErrors++
		t.Errorf("enqueue after the loss: %v", err)
	}
	if ids[e.ID] {
		t.Errorf("enqueue after the loss reused ID %s", e.ID)
	}
	after, err := q.records(ctx, idList)
	if err != nil {
		t.Fatal(err)
	}
	for i := range before {
		if after[i] != nil && after[i] != before[i] {
			t.Errorf("record %d overwritten: %v -> %v", i, before[i], after[i])
		}
	}

	// the worker's loop: take what is due; leases held by a consumer whose
	// records were lost are let expire and swept
	bt, err := q.takeN(ctx, 10)
	if err != nil && !(kind == "bucket" && errors.Is(err, ErrRecordLost)) {
		f.falseErrors++
		t.Errorf("take: %v", err)
	}
	f.take(bt)
	f.ack(t, ctx, q, bt.Tasks)
	// a fence counter lost with the ctr hash restarts past every fence held
	if len(bt.Tasks) > 0 && bt.Tasks[0].lease.Fence <= held.Tasks[0].lease.Fence {
		t.Errorf("fence %d after the loss, %d held", bt.Tasks[0].lease.Fence, held.Tasks[0].lease.Fence)
	}
	if kind == "bucket" {
		for _, tk := range held.Tasks {
			f.expired[tk.Key] = true
		}
		swept := 0
		waitFor(t, 10*time.Second, "the held leases to expire and be swept", func() bool {
			r, err := q.Sweep(ctx, MaxBatch)
			if err != nil {
				t.Fatalf("sweep: %v", err)
			}
			swept += r.Lost
			return swept == len(held.Tasks)
		})
	} else {
		f.ack(t, ctx, q, held.Tasks)
	}

	// the source lists what is not done yet
	rep, err := q.Reconcile(ctx, &sliceSource{tasks: f.open(src)}, time.Now(), ReconcileOptions{KeepExtra: true})
	if err != nil {
		f.falseErrors++
		t.Fatalf("reconcile: %v", err)
	}
	f.drain(t, ctx, q, kind == "bucket")
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dead, err := listDead(ctx, q, 0, MaxBatch)
	if err != nil {
		t.Fatal(err)
	}
	lostInDead := 0
	for _, d := range dead.Tasks {
		if errors.Is(d.Err, ErrRecordLost) {
			lostInDead++
		}
	}
	t.Logf("%s: reconcile %+v; stats lost %d restored %d counter %d index %d; dead (record lost) %d; observer %v",
		kind, rep, st.Lost, st.Restored, st.CounterLost, st.IndexLost, lostInDead, obs.losses)

	// the loss in three places, by kind
	switch kind {
	case "ctr":
		if st.CounterLost != 1 || obs.lost(ErrCounterLost) != 1 || rep.Present != 25 || rep.Added != 0 {
			t.Errorf("counter loss not reported/repaired: stats %d observer %d reconcile %+v", st.CounterLost, obs.lost(ErrCounterLost), rep)
		}
	case "bucket":
		if st.Lost != 35 || obs.lost(ErrRecordLost) != 35 || lostInDead != 35 || rep.Added != 35 {
			t.Errorf("record loss: stats %d observer %d dead %d reconcile %+v, want 35 each", st.Lost, obs.lost(ErrRecordLost), lostInDead, rep)
		}
	case "due":
		if st.Restored != 35 || obs.lost(ErrDueLost) != 35 || rep.Restored != 35 {
			t.Errorf("due loss: stats %d observer %d reconcile %+v, want 35 restored", st.Restored, obs.lost(ErrDueLost), rep)
		}
	case "idx":
		if st.IndexLost != 1 || obs.lost(ErrIndexLost) != 1 || rep.Present != 25 || rep.Added != 0 {
			t.Errorf("index loss: stats %d observer %d reconcile %+v", st.IndexLost, obs.lost(ErrIndexLost), rep)
		}
	}
	f.report(t, kind, src)
}

var lossKinds = []string{"ctr", "bucket", "due", "idx"}

// A queue key deleted (one at a time): detected, reported, repaired, and
// Reconcile restores the tasks; on real Redis.
func TestFaultKeyLoss(t *testing.T) {
	t.Parallel()
	testredis.EachReal(t, func(t *testing.T, b *testredis.Backend) {
		for _, kind := range lossKinds {
			t.Run(kind, func(t *testing.T) { keyLoss(t, b, kind) })
		}
	})
}

// The same cases on miniredis.
func TestKeyLoss(t *testing.T) {
	t.Parallel()
	for _, kind := range lossKinds {
		t.Run(kind, func(t *testing.T) { keyLoss(t, testredis.Mini(t), kind) })
	}
}

// Repair on an intact queue changes nothing and reports nothing.
func TestRepairIntact(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		obs := &lossRecorder{}
		q := newQ(t, b, Options{Observer: obsOf(obs)})
		for i := range 50 {
			mustEnqueue(t, ctx, q, Job{Key: "k" + strconv.Itoa(i%7), Token: strconv.Itoa(i)})
		}
		mustTake(t, ctx, q, 3)
		snap := snapshot(t, ctx, b)
		res, err := q.Repair(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.CounterRaised || res.IndexRebuilt || res.Orphans != 0 || res.Records != 50 || res.TopID != 50 {
			t.Errorf("repair of an intact queue: %+v", res)
		}
		if got := snapshot(t, ctx, b); got != snap {
			t.Errorf("repair of an intact queue wrote:\nbefore\n%s\nafter\n%s", snap, got)
		}
		if obs.Losses.Load() != 0 {
			t.Errorf("observer got %d losses", obs.Losses.Load())
		}
	})
}
