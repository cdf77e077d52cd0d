// Package delaybench is the delay-queue benchmark of `go run ./bench`:
// batched enqueue, memory per pending task, take+ack and the round trips
// of each call by default; with Full also one-by-one and concurrent
// enqueue, take+ack at concurrency 100 and lateness at steady rates.
// Every phase runs on its own queue under a unique prefix whose keys are
// deleted after it.
package delaybench

import (
	"context"
	"crypto/rand"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/measure"
)

// delayPayloadSize is the payload of every task the benchmark enqueues.
const delayPayloadSize = 16

// The delay floors. Memory and round trips are robust (-strict fails on
// them); the absolute rates and lateness move with the machine and are
// tight: printed, never failing.
const (
	floorBatchEnqueue = 100_000 // tasks/s, tight
	floorTakeAck      = 50_000  // tasks/s, tight
	floorLateP99      = 5 * time.Millisecond
	floorBytes        = 300 // per pending task, payload excluded, robust
)

// Config is what the main job hands the delay benchmark.
type Config struct {
	Client  redis.UniversalClient
	Backend string // miniredis, redis or cluster
	Quick   bool   // smaller counts
	Full    bool   // every phase, not only the default ones
	CSVPath string // "" = no CSV
	Out     io.Writer
}

// delayParams is Config resolved.
type delayParams struct {
	client     redis.UniversalClient
	backend    string
	meaningful bool // false on miniredis: its times say nothing about Redis
	quick      bool
	full       bool
	csvPath    string
	out        io.Writer
}

// delaySizes scales each phase. Every phase stops at its count or at its
// time budget, whichever comes first, and reports what it measured: -quick
// must finish in < 30 s on real Redis even on a loaded machine.
type delaySizes struct {
	oneByOne, batched, memory, takeAck int
	phaseBudget                        time.Duration // per enqueue, memory or take+ack step
	steady                             time.Duration // per offered rate
	drain                              time.Duration // extra wait for the last deliveries
	rates                              []int
	lead                               time.Duration
}

func delaySizesFor(p delayParams) delaySizes {
	s := delaySizes{oneByOne: 20_000, batched: 50_000, memory: 50_000, takeAck: 30_000,
		phaseBudget: 15 * time.Second, steady: 5 * time.Second, drain: 10 * time.Second,
		rates: []int{1_000, 10_000}, lead: 200 * time.Millisecond}
	if p.full {
		s.batched, s.memory, s.takeAck = 200_000, 100_000, 100_000
	}
	if p.quick {
		s.oneByOne, s.batched, s.memory, s.takeAck = 3_000, 30_000, 30_000, 20_000
		s.phaseBudget, s.steady, s.drain = 2500*time.Millisecond, time.Second, 2*time.Second
	}
	if !p.meaningful { // miniredis runs Lua in Go: keep it short
		s.oneByOne, s.batched, s.memory, s.takeAck = 500, 2_000, 0, 2_000
		s.phaseBudget, s.steady, s.drain = 2*time.Second, time.Second, 2*time.Second
	}
	return s
}

// delayRow is one line of the table and of the CSV.
type delayRow struct {
	metric string
	value  float64
	unit   string
	note   string
}

// delayBench runs every phase on its own queue under a unique prefix and
// deletes that prefix's keys after each phase.
type delayBench struct {
	p      delayParams
	sizes  delaySizes
	runID  string
	prefix string
	rows   []delayRow
	floors *measure.Floors
}

// Run measures the delay queue on cfg.Client, prints its table and adds
// its floors to floors.
func Run(ctx context.Context, cfg Config, floors *measure.Floors) error {
	p := delayParams{client: cfg.Client, backend: cfg.Backend, meaningful: cfg.Backend != "miniredis",
		quick: cfg.Quick, full: cfg.Full, csvPath: cfg.CSVPath, out: cfg.Out}
	if p.out == nil {
		p.out = os.Stdout
	}
	b := &delayBench{p: p, sizes: delaySizesFor(p), runID: randomID(), floors: floors}
	b.prefix = "tsbench-delay-" + b.runID
	label := p.backend
	if !p.meaningful {
		label += " (timings measure miniredis, not Redis)"
	}
	fmt.Fprintf(p.out, "\ndelay: backend %s, prefix %s, payload %d B, business key %d B, quick=%v full=%v\n",
		label, b.prefix, delayPayloadSize, len(businessKey(b.runID, 0)), p.quick, p.full)
	if p.meaningful {
		fmt.Fprintln(p.out, "delay: Redis and this benchmark share the machine's cores (and, on a shared server, other clients): expect noise between runs")
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
		defer cancel()
		if err := deletePrefix(cctx, p.client, b.prefix); err != nil {
			fmt.Fprintln(p.out, "delay: cleanup:", err)
		}
	}()
	type phase struct {
		name string
		run  func(context.Context) error
	}
	phases := []phase{{"round trips", b.roundTrips}, {"enqueue batched + memory", b.enqueueBatched}, {"take+ack", b.takeAck}}
	if p.full {
		phases = append(phases, phase{"enqueue one by one", b.enqueueOneByOne}, phase{"lateness", b.lateness})
	}
	for _, ph := range phases {
		start := time.Now()
		err := ph.run(ctx)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
		if cerr := deletePrefix(cctx, p.client, b.prefix); cerr != nil {
			err = errors.Join(err, fmt.Errorf("cleanup: %w", cerr))
		}
		cancel()
		if err != nil {
			return fmt.Errorf("delay bench: %s: %w", ph.name, err)
		}
		fmt.Fprintf(p.out, "delay: %s done in %v\n", ph.name, time.Since(start).Round(time.Millisecond))
	}
	b.print()
	if p.csvPath != "" {
		if err := b.writeCSV(p.csvPath); err != nil {
			return err
		}
		fmt.Fprintf(p.out, "delay: wrote %s\n", p.csvPath)
	}
	return nil
}

func (b *delayBench) queue(name string, obs delay.Observer) (*delay.Queue, error) {
	q, err := delay.New(b.p.client, name, delay.Options{Prefix: b.prefix, Observer: obs})
	if err != nil {
		return nil, fmt.Errorf("delay.New: %w", err)
	}
	return q, nil
}

func (b *delayBench) jobs(n, from int, when delay.When) []delay.Job {
	jobs := make([]delay.Job, n)
	payload := make([]byte, delayPayloadSize)
	for i := range jobs {
		jobs[i] = delay.Job{Key: businessKey(b.runID, from+i), Payload: payload, When: when}
	}
	return jobs
}

func (b *delayBench) add(r delayRow) { b.rows = append(b.rows, r) }

func (b *delayBench) enqueueOneByOne(ctx context.Context) error {
	for _, goroutines := range []int{1, 64} {
		if err := b.enqueueEach(ctx, goroutines); err != nil {
			return err
		}
	}
	return nil
}

// enqueueEach times Enqueue, one call per task, from goroutines at once
// (a cart service's request handlers): with more than one, calls that
// meet on their way go to Redis together (Enqueue's grouping).
func (b *delayBench) enqueueEach(ctx context.Context, goroutines int) error {
	q, err := b.queue(fmt.Sprintf("one%d", goroutines), nil)
	if err != nil {
		return err
	}
	jobs := b.jobs(b.sizes.oneByOne, 0, delay.After(time.Hour))
	start := time.Now()
	deadline := start.Add(b.sizes.phaseBudget)
	var next atomic.Int64
	errs := make([]error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(jobs) || (i%100 == 0 && time.Now().After(deadline)) {
					return
				}
				if _, err := q.Enqueue(ctx, jobs[i]); err != nil {
					errs[g] = fmt.Errorf("enqueue %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	done := min(int(next.Load())-goroutines, len(jobs))
	if done < 0 {
		done = 0
	}
	rate := float64(done) / elapsed.Seconds()
	if goroutines == 1 {
		b.add(delayRow{metric: "enqueue one by one", value: rate, unit: "tasks/s",
			note: fmt.Sprintf("%d tasks, 1 round trip each%s", done, cut(done, len(jobs)))})
		return nil
	}
	b.add(delayRow{metric: fmt.Sprintf("enqueue one by one, %d goroutines", goroutines), value: rate, unit: "tasks/s",
		note: fmt.Sprintf("%d tasks, one Enqueue each; calls that meet go together%s", done, cut(done, len(jobs)))})
	return nil
}

// cut notes that a phase stopped at its time budget.
func cut(done, want int) string {
	if done < want {
		return fmt.Sprintf(" (time budget hit: %d of %d)", done, want)
	}
	return ""
}

// enqueueBatched times EnqueueBatch (pipelines of 1000 scripts) from one
// caller and from two, then measures memory on a fresh queue of
// sizes.memory tasks.
func (b *delayBench) enqueueBatched(ctx context.Context) error {
	callers := []int{1}
	if b.p.full {
		callers = append(callers, 2)
	}
	for _, callers := range callers {
		if err := b.enqueueBatchedCallers(ctx, callers); err != nil {
			return err
		}
	}

	// Memory: a fresh queue, so its fixed keys (counters) count too.
	mq, err := b.queue("mem", nil)
	if err != nil {
		return err
	}
	pattern := b.prefix + ":*"
	mjobs := b.jobs(b.sizes.memory, 0, delay.After(time.Hour))
	before, okInfo, err := measure.UsedMemory(ctx, b.p.client)
	if err != nil {
		return err
	}
	keysBefore, _, okKeys, err := measure.KeysMemory(ctx, b.p.client, pattern)
	if err != nil {
		return err
	}
	mem := measure.Floor{Subject: "delay", Kind: measure.Robust, Name: "memory per pending task, payload excluded (INFO used_memory)", Want: fmt.Sprintf("≤ %d B", floorBytes)}
	memKeys := measure.Floor{Subject: "delay", Kind: measure.Robust, Name: "memory per pending task, payload excluded (MEMORY USAGE)", Want: fmt.Sprintf("≤ %d B", floorBytes)}
	if !okInfo || !okKeys || len(mjobs) == 0 {
		why := b.p.backend + " reports no used_memory / MEMORY USAGE"
		b.floors.JudgeIf(false, why, mem, false)
		b.floors.JudgeIf(false, why, memKeys, false)
		return nil
	}
	n, err := enqueueAll(ctx, mq, mjobs, time.Now().Add(2*b.sizes.phaseBudget))
	if err != nil {
		return err
	}
	after, _, err := measure.UsedMemory(ctx, b.p.client)
	if err != nil {
		return err
	}
	keysAfter, _, _, err := measure.KeysMemory(ctx, b.p.client, pattern)
	if err != nil {
		return err
	}
	if n == 0 {
		return errors.New("memory: nothing enqueued")
	}
	perTask := float64(after-before)/float64(n) - delayPayloadSize
	keysPerTask := float64(keysAfter-keysBefore)/float64(n) - delayPayloadSize
	mem.Value, mem.Note = fmt.Sprintf("%.0f B", perTask), fmt.Sprintf("delta over %d tasks of %d B payload, %d B key%s", n, delayPayloadSize, len(mjobs[0].Key), cut(n, len(mjobs)))
	memKeys.Value, memKeys.Note = fmt.Sprintf("%.0f B", keysPerTask), "sum over the queue's keys: immune to other clients"
	b.floors.Judge(mem, perTask <= floorBytes)
	b.floors.Judge(memKeys, keysPerTask <= floorBytes)
	return nil
}

// enqueueBatchedCallers times EnqueueBatch from callers callers at once
// (each its own share of the jobs, as several producers would). The floor
// is for one caller; with more, the client's encoding overlaps the
// server's work, where one caller leaves Redis idle while it encodes the
// next pipeline and decodes the last.
func (b *delayBench) enqueueBatchedCallers(ctx context.Context, callers int) error {
	q, err := b.queue(fmt.Sprintf("batch%d", callers), nil)
	if err != nil {
		return err
	}
	jobs := b.jobs(b.sizes.batched, 0, delay.After(time.Hour))
	per := len(jobs) / callers
	done := make([]int, callers)
	errs := make([]error, callers)
	start := time.Now()
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done[c], errs[c] = enqueueAll(ctx, q, jobs[c*per:(c+1)*per], start.Add(b.sizes.phaseBudget))
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	total := 0
	for _, d := range done {
		total += d
	}
	rate := float64(total) / elapsed.Seconds()
	if callers == 1 {
		b.floors.JudgeIf(b.p.meaningful, measure.NotRedis, measure.Floor{Subject: "delay", Kind: measure.Tight,
			Name: "enqueue batched (EnqueueBatch, 1000 a pipeline), one caller", Want: fmt.Sprintf("≥ %dk tasks/s", floorBatchEnqueue/1000),
			Value: fmt.Sprintf("%.0f tasks/s", rate), Note: fmt.Sprintf("%d tasks%s", total, cut(total, per))}, rate >= floorBatchEnqueue)
	} else {
		b.add(delayRow{metric: fmt.Sprintf("enqueue batched, %d callers at once", callers), value: rate, unit: "tasks/s",
			note: fmt.Sprintf("%d tasks, %d per caller%s", total, per, cut(total, callers*per))})
	}
	return deletePrefix(ctx, b.p.client, b.prefix)
}

// enqueueAll sends jobs through EnqueueBatch, MaxBatch per call, until
// all are sent or deadline passes (zero: no deadline). It returns how many
// were enqueued and fails on the first per-job error.
func enqueueAll(ctx context.Context, q *delay.Queue, jobs []delay.Job, deadline time.Time) (int, error) {
	done := 0
	for done < len(jobs) && (deadline.IsZero() || time.Now().Before(deadline)) {
		chunk := jobs[done:min(done+delay.MaxBatch, len(jobs))]
		res, err := q.EnqueueBatch(ctx, chunk)
		if err != nil {
			return done, fmt.Errorf("enqueue batch: %w", err)
		}
		for i, r := range res {
			if r.Err != nil {
				return done, fmt.Errorf("enqueue batch job %d: %w", done+i, r.Err)
			}
			if r.Duplicate {
				return done, fmt.Errorf("enqueue batch job %d: unexpected duplicate", done+i)
			}
		}
		done += len(chunk)
	}
	return done, nil
}

// delayAckCounter is an Observer that signals when want acks were seen.
type delayAckCounter struct {
	delay.Recorder
	want atomic.Int64
	last atomic.Int64 // Unix ns of the latest ack
	done chan struct{}
	once sync.Once
}

func newDelayAckCounter(want int) *delayAckCounter {
	c := &delayAckCounter{done: make(chan struct{})}
	c.want.Store(int64(want))
	return c
}

// setWant lowers the target to what was actually enqueued.
func (c *delayAckCounter) setWant(n int) {
	c.want.Store(int64(n))
	if c.Acked.Load() >= int64(n) {
		c.once.Do(func() { close(c.done) })
	}
}

func (c *delayAckCounter) OnAck(queue string) {
	c.Recorder.OnAck(queue)
	c.last.Store(time.Now().UnixNano())
	if c.Acked.Load() >= c.want.Load() {
		c.once.Do(func() { close(c.done) })
	}
}

// delayRunWorker runs a worker until the counter has seen every ack or
// timeout passes, with produce (if any) running meanwhile; it returns when
// Run has returned.
func delayRunWorker(ctx context.Context, q *delay.Queue, obs *delayAckCounter, concurrency, batch int, h delay.Handler,
	started chan<- time.Time, timeout time.Duration, produce func(context.Context) error) error {
	w, err := delay.NewWorker(q, h, delay.WorkerOptions{Concurrency: concurrency, BatchSize: batch, ShutdownTimeout: 5 * time.Second})
	if err != nil {
		return fmt.Errorf("delay.NewWorker: %w", err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	runErr := make(chan error, 1)
	started <- time.Now()
	go func() { runErr <- w.Run(wctx) }()
	if produce != nil {
		if err := produce(ctx); err != nil {
			stop()
			<-runErr
			return err
		}
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-obs.done:
	case <-timer.C:
	case err := <-runErr:
		return fmt.Errorf("worker stopped early: %w", err)
	}
	stop()
	if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("worker: %w", err)
	}
	return nil
}

// takeAck pre-enqueues tasks due now and times one worker (concurrency 8,
// batch 100, no-op handler) from its start to the last ack. Without -quick
// it repeats at concurrency 100, for information: it shows how much of the
// figure is the worker's concurrency rather than Redis.
func (b *delayBench) takeAck(ctx context.Context) error {
	if err := b.takeAckAt(ctx, 8, 100, true); err != nil {
		return err
	}
	if !b.p.full {
		return nil
	}
	if err := deletePrefix(ctx, b.p.client, b.prefix); err != nil {
		return err
	}
	return b.takeAckAt(ctx, 100, 100, false)
}

func (b *delayBench) takeAckAt(ctx context.Context, concurrency, batch int, floor bool) error {
	obs := newDelayAckCounter(b.sizes.takeAck)
	q, err := b.queue(fmt.Sprintf("takeack%d", concurrency), obs)
	if err != nil {
		return err
	}
	n, err := enqueueAll(ctx, q, b.jobs(b.sizes.takeAck, 0, delay.After(0)), time.Now().Add(b.sizes.phaseBudget))
	if err != nil {
		return err
	}
	obs.setWant(n)
	var handled atomic.Int64
	started := make(chan time.Time, 1)
	err = delayRunWorker(ctx, q, obs, concurrency, batch, func(context.Context, *delay.Task) error {
		handled.Add(1)
		return nil
	}, started, b.sizes.phaseBudget, nil)
	if err != nil {
		return err
	}
	start := <-started
	acked := obs.Acked.Load()
	if acked == 0 {
		return fmt.Errorf("take+ack: nothing acked within %v", b.sizes.phaseBudget)
	}
	rate := float64(acked) / time.Unix(0, obs.last.Load()).Sub(start).Seconds()
	name := fmt.Sprintf("take+ack, 1 worker, concurrency %d, batch %d", concurrency, batch)
	note := fmt.Sprintf("%d tasks due now, no-op handler, worker start to last ack%s", acked, cut(int(acked), n))
	if !floor {
		b.add(delayRow{metric: name, value: rate, unit: "tasks/s", note: note})
		return nil
	}
	b.floors.JudgeIf(b.p.meaningful, measure.NotRedis, measure.Floor{Subject: "delay", Kind: measure.Tight, Name: name,
		Want: fmt.Sprintf("≥ %dk tasks/s", floorTakeAck/1000), Value: fmt.Sprintf("%.0f tasks/s", rate), Note: note}, rate >= floorTakeAck)
	return nil
}

// lateness offers a steady rate of tasks due lead after their enqueue (by
// Redis TIME, delay.After) and records, in the handler, the delivery time on
// the server's clock (the local clock plus an offset to Redis TIME measured
// once with µs resolution, see measure.ClockOffset) minus the task's due time
// (decoded from its score: server clock, ms). The library's own OnDelivered
// lateness (Redis TIME at take minus due, ms resolution) is reported beside it.
func (b *delayBench) lateness(ctx context.Context) error {
	for _, rate := range b.sizes.rates {
		if err := b.latenessAt(ctx, rate); err != nil {
			return fmt.Errorf("at %d/s: %w", rate, err)
		}
	}
	return nil
}

func (b *delayBench) latenessAt(ctx context.Context, rate int) error {
	want := int(float64(rate) * b.sizes.steady.Seconds())
	obs := newDelayAckCounter(want)
	q, err := b.queue("late"+strconv.Itoa(rate), obs)
	if err != nil {
		return err
	}
	var samples measure.Samples
	jobs := b.jobs(want, 0, delay.After(b.sizes.lead))
	var offered float64
	sent := 0
	// The producer sends, every millisecond, the tasks owed by then as one
	// EnqueueBatch pipeline (one round trip), so 10k/s needs no more than
	// 1k round trips a second. It stops at 1.5× its planned time even when
	// it fell behind (the offered rate reported is then below the target).
	produce := func(ctx context.Context) error {
		time.Sleep(100 * time.Millisecond) // let the worker reach its idle wait
		start := time.Now()
		stopAt := start.Add(b.sizes.steady * 3 / 2)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		defer func() { obs.setWant(sent) }()
		for sent < want && time.Now().Before(stopAt) {
			// At most 10 ms worth per round trip, so a producer that fell
			// behind still sees its stop time.
			owed := min(want, int(time.Since(start).Seconds()*float64(rate))+1, sent+max(1, rate/100))
			if owed > sent {
				if _, err := enqueueAll(ctx, q, jobs[sent:owed], time.Time{}); err != nil {
					return err
				}
				sent = owed
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		offered = float64(sent) / time.Since(start).Seconds()
		return nil
	}
	offset, rtt, err := measure.ClockOffset(ctx, b.p.client)
	if err != nil {
		return err
	}
	started := make(chan time.Time, 1)
	err = delayRunWorker(ctx, q, obs, 8, 100, func(_ context.Context, t *delay.Task) error {
		samples.Add(time.Now().Add(offset).Sub(t.Due))
		return nil
	}, started, b.sizes.lead+b.sizes.drain, produce)
	if err != nil {
		return err
	}
	got := samples.Summary()
	lib := &obs.Lateness
	label := fmt.Sprintf("lateness at %d/s", rate)
	note := fmt.Sprintf("1 worker (concurrency 8, batch 100); %d tasks due +%v, offered %.0f/s; min %s ms; clock offset to Redis TIME %v ± %v",
		sent, b.sizes.lead, offered, delayMs(got.Min), offset.Round(time.Microsecond), (rtt / 2).Round(time.Microsecond))
	if sent < want {
		note += fmt.Sprintf("; the producer fell behind (%d of %d sent)", sent, want)
	}
	if got.N < sent {
		note += fmt.Sprintf("; only %d delivered before the drain timeout: figures are lower bounds", got.N)
	}
	b.add(delayRow{metric: label + " p50 (handler)", value: delayMsF(got.P50), unit: "ms", note: note})
	if rate == 10_000 {
		b.floors.JudgeIf(b.p.meaningful, measure.NotRedis, measure.Floor{Subject: "delay", Kind: measure.Tight,
			Name: label + " p99 (handler), every task delivered", Want: fmt.Sprintf("≤ %v", floorLateP99), Value: delayMs(got.P99) + " ms",
			Note: fmt.Sprintf("%d of %d delivered", got.N, want)}, got.N == sent && sent == want && got.P99 <= floorLateP99)
	}
	b.add(delayRow{metric: label + " p99 (handler)", value: delayMsF(got.P99), unit: "ms"})
	b.add(delayRow{metric: label + " max (handler)", value: delayMsF(got.Max), unit: "ms"})
	b.add(delayRow{metric: label + " p99 (take, library histogram)", value: delayMsF(lib.Percentile(99)), unit: "ms",
		note: fmt.Sprintf("Redis TIME at take − due; p50 %s ms, max %s ms, %d early", delayMs(lib.Percentile(50)), delayMs(lib.Max()), lib.Early())})
	return nil
}

func delayMsF(d time.Duration) float64 { return float64(d) / 1e6 }
func delayMs(d time.Duration) string   { return strconv.FormatFloat(delayMsF(d), 'f', 2, 64) }

func (r delayRow) valueString() string {
	switch {
	case r.unit == "ms":
		return strconv.FormatFloat(r.value, 'f', 2, 64)
	case r.note != "" && r.value == 0 && r.unit == "B":
		return "n/a"
	default:
		return strconv.FormatFloat(r.value, 'f', 0, 64)
	}
}

func (b *delayBench) print() {
	if len(b.rows) == 0 {
		return
	}
	fmt.Fprintf(b.p.out, "\ndelay queue on %s\n", b.p.backend)
	w := tabwriter.NewWriter(b.p.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "metric\tvalue\tunit\tnote")
	for _, r := range b.rows {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.metric, r.valueString(), r.unit, r.note)
	}
	_ = w.Flush()
	fmt.Fprintln(b.p.out, "(the delay floors are in the floors table below)")
}

func (b *delayBench) writeCSV(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("delay csv: %w", err)
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"backend", "metric", "value", "unit", "note"})
	for _, r := range b.rows {
		_ = w.Write([]string{b.p.backend, r.metric, r.valueString(), r.unit, r.note})
	}
	w.Flush()
	return errors.Join(w.Error(), f.Close())
}

// deletePrefix deletes every key under prefix, on every master.
func deletePrefix(ctx context.Context, c redis.UniversalClient, prefix string) error {
	_, err := measure.DeleteKeys(ctx, c, prefix+":*")
	return err
}

func randomID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// businessKey is a 25-byte business key: "order:<6 hex>:<12 digits>".
func businessKey(run string, n int) string {
	return fmt.Sprintf("order:%s:%012d", run, n)
}
