package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// system is one queue in one configuration, run through the workloads.
// Each call starts from an empty queue and leaves nothing behind that the
// next could see.
type system interface {
	name() string
	// product groups the configurations of one library (the floors are
	// judged against a product's best configuration).
	product() string
	// settings states the configuration, for the table's legend.
	settings() string
	// round runs the burst, then each steady rate, as one round.
	round(ctx context.Context, w workload, rates []int) (burst phase, steady []phase, err error)
	// memory fills the queue with w.memN tasks due in an hour and returns
	// the bytes each one adds, and what those bytes are.
	memory(ctx context.Context, w workload) (float64, string, error)
	cleanup(ctx context.Context) error
}

// workload is what every system is asked to do, the same for all.
type workload struct {
	run       string
	first     uint64        // the round's first task number (numbers never repeat within a run)
	n         int           // burst size
	memN      int           // pending tasks for the memory figure
	burstLead time.Duration // the burst is due this long after its first enqueue
	lead      time.Duration // each steady task is due this long after its enqueue
	length    time.Duration // steady phase length
	wait      time.Duration // how long a phase waits for stragglers after the last due time
}

// steadyWant is the number of tasks a steady phase at rate offers.
func (w workload) steadyWant(rate int) int { return int(float64(rate) * w.length.Seconds()) }

// span is how many task numbers a round at these rates uses.
func (w workload) span(rates []int) uint64 {
	n := uint64(w.n)
	for _, r := range rates {
		n += uint64(w.steadyWant(r))
	}
	return n
}

// phase is what one workload measured on one system.
type phase struct {
	lat         latency
	want        int
	enqueueLate bool    // the burst's enqueue outran its due time
	offered     float64 // steady: the rate the producer achieved
}

// valid is false when a task was handled twice or a payload was not ours.
func (p phase) valid() bool { return p.lat.dups == 0 && p.lat.broken == 0 }

// complete is true when every task was handled within the wait.
func (p phase) complete() bool { return p.lat.delivered == p.want }

// p99 is the phase's p99 of |handled − due| (a task handled early is as
// wrong as one handled late) over every task it enqueued, and whether
// that is only a lower bound: a task not handled within the wait is later
// than the wait, so when more than 1% are missing the p99 is at least the
// wait.
func (p phase) p99(wait time.Duration) (time.Duration, bool) {
	missing := p.want - p.lat.delivered
	if missing*100 > p.want {
		return max(wait, p.lat.max), true
	}
	return p.lat.p99abs, false
}

// queuePeer is a library driven from Go: the workloads below are written
// once for all of them.
type queuePeer interface {
	name() string
	product() string
	settings() string
	enqueue(ctx context.Context, t task) error
	// enqueueMany is the library's fastest documented way to add many
	// tasks (a batch call, or concurrent calls where it has none).
	enqueueMany(ctx context.Context, ts []task) error
	// start runs a worker calling deliver with each payload.
	start(ctx context.Context, deliver func(payload []byte)) error
	stop()
	// footprint is the bytes the peer's store holds now, and what they are.
	footprint(ctx context.Context) (int64, string, error)
	// reset empties the queue between workloads.
	reset(ctx context.Context) error
	cleanup(ctx context.Context) error
}

// goSystem runs the workloads on a queuePeer, with one worker running
// through the round as a deployed one would: a worker's start-up (River's
// leader election and the staggered start of its scheduler, asynq's first
// forwarder tick) is not any workload's lateness.
type goSystem struct{ queuePeer }

func makeTasks(run string, first uint64, n int, due time.Time) []task {
	ts := make([]task, n)
	for i := range ts {
		k := first + uint64(i)
		ts[i] = task{key: businessKey(run, k), payload: makePayload(due, k), due: due}
	}
	return ts
}

// warmTimeout bounds the warm-up task's wait: asynq's default forwarder
// runs every 5 s, River's scheduler every 5 s after a staggered start.
const warmTimeout = 30 * time.Second

func (s goSystem) round(ctx context.Context, w workload, rates []int) (phase, []phase, error) {
	defer s.reset(ctx)
	var cur atomic.Pointer[recorder]
	deliver := func(p []byte) {
		if r := cur.Load(); r != nil {
			r.deliver(p)
		}
	}
	// warm starts the worker and waits until it has handled one task due
	// at once (numbered just before the round's), so the worker is whole.
	warm := func() error {
		if err := s.start(ctx, deliver); err != nil {
			return fmt.Errorf("start worker: %w", err)
		}
		rec := newRecorder(w.first-1, 1)
		cur.Store(rec)
		now := time.Now().Truncate(time.Millisecond)
		if err := s.enqueue(ctx, makeTasks(w.run, w.first-1, 1, now)[0]); err != nil {
			return fmt.Errorf("warm-up enqueue: %w", err)
		}
		if !rec.wait(ctx, time.Now().Add(warmTimeout)) {
			return fmt.Errorf("warm-up task not handled within %v", warmTimeout)
		}
		return nil
	}
	// settle starts afresh after a phase left tasks behind, so they do not
	// land in the next phase.
	settle := func(p phase) error {
		if p.complete() {
			return nil
		}
		if err := s.reset(ctx); err != nil {
			return err
		}
		return warm()
	}
	if err := warm(); err != nil {
		return phase{}, nil, err
	}
	defer s.stop()

	// Burst: w.n tasks due at one instant w.burstLead after the first
	// enqueue, through the library's fastest path.
	rec := newRecorder(w.first, w.n)
	cur.Store(rec)
	due := time.Now().Add(w.burstLead).Truncate(time.Millisecond)
	if err := s.enqueueMany(ctx, makeTasks(w.run, w.first, w.n, due)); err != nil {
		return phase{}, nil, fmt.Errorf("burst enqueue: %w", err)
	}
	late := time.Now().After(due)
	rec.wait(ctx, latest(due, time.Now()).Add(w.wait))
	burst := phase{lat: rec.summary(), want: w.n, enqueueLate: late}
	if err := settle(burst); err != nil {
		return phase{}, nil, err
	}
	first := w.first + uint64(w.n)
	var steady []phase
	for _, rate := range rates {
		p, err := s.steady(ctx, w, first, rate, &cur)
		if err != nil {
			return phase{}, nil, fmt.Errorf("steady %d/s: %w", rate, err)
		}
		steady = append(steady, p)
		first += uint64(w.steadyWant(rate))
		if err := settle(p); err != nil {
			return phase{}, nil, err
		}
	}
	return burst, steady, nil
}

// handlers is the handler concurrency of every system but River (which
// fetches only for free workers, so it runs 100): a service whose handlers
// call something that bounds them.
const handlers = 8

// steadyProducers enqueue side by side so that one slow call does not
// hold back the offered rate (a service's request handlers would enqueue
// concurrently too).
const steadyProducers = 8

// steady offers rate tasks/s for w.length, each due w.lead after its
// enqueue, then waits for every task.
func (s goSystem) steady(ctx context.Context, w workload, first uint64, rate int, cur *atomic.Pointer[recorder]) (phase, error) {
	want := w.steadyWant(rate)
	rec := newRecorder(first, want)
	cur.Store(rec)
	work := make(chan uint64)
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for range steadyProducers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				due := time.Now().Add(w.lead).Truncate(time.Millisecond)
				if err := s.enqueue(ctx, task{key: businessKey(w.run, k), payload: makePayload(due, k), due: due}); err != nil {
					failed.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for i := range want {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		work <- first + uint64(i)
	}
	close(work)
	wg.Wait()
	offered := float64(want) / time.Since(start).Seconds()
	if errp := failed.Load(); errp != nil {
		return phase{}, fmt.Errorf("steady enqueue: %w", *errp)
	}
	rec.wait(ctx, time.Now().Add(w.lead+w.wait))
	return phase{lat: rec.summary(), want: want, offered: offered}, nil
}

// memory adds w.memN tasks due in an hour, with no worker, and divides the
// growth of the peer's footprint by their number.
func (s goSystem) memory(ctx context.Context, w workload) (float64, string, error) {
	defer s.reset(ctx)
	if err := s.reset(ctx); err != nil {
		return 0, "", err
	}
	b0, _, err := s.footprint(ctx)
	if err != nil {
		return 0, "", err
	}
	if err := s.enqueueMany(ctx, makeTasks(w.run, w.first, w.memN, time.Now().Add(time.Hour).Truncate(time.Millisecond))); err != nil {
		return 0, "", fmt.Errorf("memory enqueue: %w", err)
	}
	b1, what, err := s.footprint(ctx)
	if err != nil {
		return 0, "", err
	}
	return float64(b1-b0) / float64(w.memN), what, nil
}

// enqueueConcurrently adds ts one call each from concGoroutines goroutines
// at once, for libraries without a batch call.
func enqueueConcurrently(ctx context.Context, ts []task, enqueue func(context.Context, task) error) error {
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for range concGoroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for failed.Load() == nil {
				i := next.Add(1) - 1
				if i >= int64(len(ts)) {
					return
				}
				if err := enqueue(ctx, ts[i]); err != nil {
					failed.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	wg.Wait()
	if errp := failed.Load(); errp != nil {
		return *errp
	}
	return nil
}

const concGoroutines = 64

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
