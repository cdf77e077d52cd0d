// Package delaybench is the delay-queue benchmark of `go run ./bench`:
// batched enqueue, memory per pending task, take+ack and the round trips
// of each call by default; with Full also one-by-one and concurrent
// enqueue, take+ack at concurrency 100 and lateness at steady rates.
// Every phase runs on its own queue under a unique prefix whose keys are
// deleted after it.
package delaybench

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
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
	b := &delayBench{p: p, sizes: delaySizesFor(p), runID: measure.RunID(), floors: floors}
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

// businessKey is a 25-byte business key: "order:<6 hex>:<12 digits>".
func businessKey(run string, n int) string {
	return fmt.Sprintf("order:%s:%012d", run, n)
}
