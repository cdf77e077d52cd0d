package delaybench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/measure"
)

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
	q, err := b.queue(fmt.Sprintf("one%d", goroutines), delay.Observer{})
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
	mq, err := b.queue("mem", delay.Observer{})
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
	q, err := b.queue(fmt.Sprintf("batch%d", callers), delay.Observer{})
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
