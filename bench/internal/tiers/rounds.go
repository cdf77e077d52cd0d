package tiers

import (
	"context"
	"fmt"
	"github.com/tierset/tierset/internal/measure"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"
)

// roundLength is the length of one interleaved round. Short rounds spread
// a noisy neighbour's bursts over every impl instead of one, and a default
// 150 ms case gets 3, so a median over rounds outvotes one stalled round.
const roundLength = 50 * time.Millisecond

// stats is one measured (impl, tiers, concurrency) case.
type stats struct {
	Impl        string
	Tiers       int
	Concurrency int
	Lines       int // lookups per op
	Ops         int64
	Wall        time.Duration   // summed over the case's rounds
	rounds      []float64       // ops/s of each round
	roundP50    []time.Duration // p50 latency of each round
	lat         []time.Duration // every op's latency, sorted after the run
	mallocs     uint64          // heap allocations during the timed rounds, whole process
	hitsCounted bool            // the impl counts near hits (see impl.hits)
	hits        int64           // near hits during the timed rounds
	invalid     string          // why the row did not measure what it names ("" when it did)
}

// AllocsPerLine is the process's heap allocations per timed lookup.
// Rounds run one case at a time, so they are the case's own (plus a
// background goroutine's, negligible over a round's ops).
func (s *stats) AllocsPerLine() float64 {
	if s.Ops == 0 {
		return math.NaN()
	}
	return float64(s.mallocs) / float64(s.Ops*int64(s.Lines))
}

// OpsPerSec is all ops over the case's whole measured wall time.
func (s *stats) OpsPerSec() float64 {
	if s.Wall <= 0 {
		return 0
	}
	return float64(s.Ops) / s.Wall.Seconds()
}

// pairedRatio is the median over rounds of a's ops/s over b's in the same
// round. measure runs the cases of a tier count back to back, so each pair
// shared the machine's load of that moment; a neighbour's burst that
// stalls a few rounds moves the ratio of totals a lot and this median
// little. NaN when the rounds do not pair up.
func pairedRatio(a, b *stats) float64 {
	if len(a.rounds) == 0 || len(a.rounds) != len(b.rounds) {
		return math.NaN()
	}
	r := make([]float64, 0, len(a.rounds))
	for i := range a.rounds {
		if b.rounds[i] > 0 {
			r = append(r, a.rounds[i]/b.rounds[i])
		}
	}
	return median(r)
}

// median is the median of x (sorted in place), NaN for none.
func median(x []float64) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	slices.Sort(x)
	if n := len(x); n%2 == 0 {
		return (x[n/2-1] + x[n/2]) / 2
	}
	return x[len(x)/2]
}

// LookupsPerSec counts every cart line as a lookup.
func (s *stats) LookupsPerSec() float64 { return s.OpsPerSec() * float64(s.Lines) }

// Quantile returns the q-quantile of the op latencies (nearest rank).
func (s *stats) Quantile(q float64) time.Duration { return measure.Quantile(s.lat, q) }

// measureRounds runs every case for dur at concurrency conc, interleaved: the
// time is cut into rounds of about roundLength and every round runs each
// case (impl × tier count) once, in an order rotated per round and
// reversed every other round (so neither of two neighbours always goes
// first), keeping the cases of a tier count next to each other. Noise
// from the shared machine falls on all of them alike and the ratios
// between impls and between tier counts come from the same minutes. The
// garbage of a case that made much (fullscan) is collected before the next
// starts, so it is not billed to whoever follows; a collection after every
// case would cost seconds of a default run for nothing.
func measureRounds(ctx context.Context, cases []impl, conc int, dur time.Duration) ([]*stats, error) {
	rounds := max(1, int(dur/roundLength))
	round := dur / time.Duration(rounds)
	out := make([]*stats, len(cases))
	for k, c := range cases {
		out[k] = &stats{Impl: c.name, Tiers: c.tiers, Concurrency: conc, Lines: c.lines, hitsCounted: c.hits != nil}
	}
	// Untimed warm-up: conc connections per case, first touch of every path.
	for _, c := range cases {
		if _, err := runRound(ctx, c, conc, min(round, 20*time.Millisecond), 0, nil); err != nil {
			return nil, fmt.Errorf("bench: %s tiers=%d c=%d warm-up: %w", c.name, c.tiers, conc, err)
		}
	}
	const collectAfter = 4 << 20 // bytes a case allocated
	lastAlloc := uint64(collectAfter)
	for r := 0; r < rounds; r++ {
		for k := range cases {
			if r%2 == 1 {
				k = len(cases) - 1 - k
			}
			i := (k + r) % len(cases)
			if lastAlloc >= collectAfter {
				runtime.GC()
			}
			before := out[i].Ops
			var hits0 int64
			if cases[i].hits != nil {
				hits0 = cases[i].hits()
			}
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			n0 := len(out[i].lat)
			wall, err := runRound(ctx, cases[i], conc, round, r, out[i])
			if err != nil {
				return nil, fmt.Errorf("bench: %s tiers=%d c=%d: %w", cases[i].name, cases[i].tiers, conc, err)
			}
			runtime.ReadMemStats(&m1)
			out[i].mallocs += m1.Mallocs - m0.Mallocs
			lastAlloc = m1.TotalAlloc - m0.TotalAlloc
			if cases[i].hits != nil {
				out[i].hits += cases[i].hits() - hits0
			}
			out[i].Wall += wall
			out[i].rounds = append(out[i].rounds, float64(out[i].Ops-before)/wall.Seconds())
			lat := slices.Clone(out[i].lat[n0:])
			slices.Sort(lat)
			out[i].roundP50 = append(out[i].roundP50, measure.Quantile(lat, 0.5))
		}
	}
	for _, s := range out {
		slices.Sort(s.lat)
		s.checkServed()
	}
	return out, nil
}

// runRound runs conc goroutines of im for d and adds their ops and
// latencies to into (nil: discard). It returns the round's wall time,
// from the common start until the last goroutine finished its last op.
func runRound(ctx context.Context, im impl, conc int, d time.Duration, round int, into *stats) (time.Duration, error) {
	type result struct {
		ops int64
		lat []time.Duration
		err error
	}
	results := make([]result, conc)
	start := make(chan struct{})
	var ready, done sync.WaitGroup
	hint := 0
	if into != nil && round > 0 {
		hint = int(into.Ops/int64(round)/int64(conc)) * 5 / 4 // the ops one goroutine did per round so far
	}
	for g := 0; g < conc; g++ {
		ready.Add(1)
		done.Add(1)
		go func(g int) {
			defer done.Done()
			op := im.newOp()
			lat := make([]time.Duration, 0, hint)
			// Goroutines and rounds start at different values, all replaying the same list.
			i := g*7919 + round*104729
			ready.Done()
			<-start
			deadline := time.Now().Add(d)
			var n int64
			// One clock read per op: an op's end is the next one's start,
			// which matters for a near-cache op of a few hundred ns.
			t0 := time.Now()
			for t0.Before(deadline) && ctx.Err() == nil {
				if err := op(ctx, i); err != nil {
					results[g].err = err
					break
				}
				t1 := time.Now()
				lat = append(lat, t1.Sub(t0))
				t0 = t1
				n++
				i++
			}
			results[g].ops, results[g].lat = n, lat
		}(g)
	}
	ready.Wait()
	t0 := time.Now()
	close(start)
	done.Wait()
	wall := time.Since(t0)
	for _, r := range results {
		if r.err != nil {
			return 0, r.err
		}
		if into != nil {
			into.Ops += r.ops
			into.lat = append(into.lat, r.lat...)
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return wall, nil
}

// pairedFlat is range at the highest tier count against the lowest, each
// op of one alternating with an op of the other in the same goroutines, so
// every moment's noise falls on both alike: the flatness floor's sample.
type pairedFlat struct {
	LoTiers, HiTiers, Conc int
	LoP50, HiP50           time.Duration
	Ops                    int64
}

// Ratio is the high tier count's p50 over the low one's.
func (p *pairedFlat) Ratio() float64 { return float64(p.HiP50) / float64(p.LoP50) }

// measurePaired runs conc goroutines for d, each alternating one op of lo
// and one of hi, and returns the p50 of each.
func measurePaired(ctx context.Context, lo, hi impl, conc int, d time.Duration) (*pairedFlat, error) {
	type result struct {
		lo, hi []time.Duration
		err    error
	}
	results := make([]result, conc)
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for g := 0; g < conc; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ops := [2]func(context.Context, int) error{lo.newOp(), hi.newOp()}
			var lat [2][]time.Duration
			for i := g * 7919; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
				k := i % 2
				t0 := time.Now()
				if err := ops[k](ctx, i/2); err != nil {
					results[g].err = err
					return
				}
				lat[k] = append(lat[k], time.Since(t0))
			}
			results[g].lo, results[g].hi = lat[0], lat[1]
		}()
	}
	wg.Wait()
	var los, his []time.Duration
	for _, r := range results {
		if r.err != nil {
			return nil, fmt.Errorf("bench: paired %s tiers=%d/%d: %w", lo.name, lo.tiers, hi.tiers, r.err)
		}
		los, his = append(los, r.lo...), append(his, r.hi...)
	}
	if len(los) == 0 || len(his) == 0 {
		return nil, fmt.Errorf("bench: paired %s: no ops in %v", lo.name, d)
	}
	slices.Sort(los)
	slices.Sort(his)
	return &pairedFlat{LoTiers: lo.tiers, HiTiers: hi.tiers, Conc: conc, LoP50: measure.Quantile(los, 0.5),
		HiP50: measure.Quantile(his, 0.5), Ops: int64(len(los) + len(his))}, nil
}
