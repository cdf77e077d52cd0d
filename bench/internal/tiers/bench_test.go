package tiers

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/internal/measure"
	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/score"
)

// benchTiers are the tier counts of BenchmarkMatch, as in `go run ./bench`.
var benchTiers = []int{3, 30, 300, 3000}

// cartBenchTiers is the tier count of every promotion in BenchmarkCart.
const cartBenchTiers = 300

// benchBackend is one backend of a benchmark run, with the workloads warmed
// on it so far (warming 3000 tiers once, not once per b.N probe).
type benchBackend struct {
	*testredis.Backend
	target target
	mu     sync.Mutex
	warmed map[[2]int]*workload // {tiers, lines}
}

// benchBackends returns miniredis, plus the real Redis and Cluster when
// TIERSET_REDIS_URL / TIERSET_REDIS_CLUSTER are set. Keys live under each
// backend's unique prefix and are removed at cleanup.
func benchBackends(b *testing.B) []*benchBackend {
	b.Helper()
	list := []*testredis.Backend{testredis.Mini(b)}
	if testredis.URL() != "" { // TIERSET_REDIS_URL or the test binary's private redis-server
		list = append(list, testredis.Redis(b))
	}
	if len(testredis.ClusterAddrs()) > 0 {
		list = append(list, testredis.Cluster(b))
	}
	var out []*benchBackend
	for _, be := range list {
		lib, err := cache.New(be.Client, cache.Options{Prefix: be.Prefix, MinorDigits: minorDigits})
		if err != nil {
			b.Fatalf("cache.New: %v", err)
		}
		out = append(out, &benchBackend{Backend: be, target: target{lib: lib, rc: be.Client}, warmed: map[[2]int]*workload{}})
	}
	return out
}

// workload warms (once) and verifies against the oracle the workload of
// tiers × lines on this backend.
func (be *benchBackend) workload(tb testing.TB, tiers, lines int) *workload {
	tb.Helper()
	be.mu.Lock()
	defer be.mu.Unlock()
	if w := be.warmed[[2]int{tiers, lines}]; w != nil {
		return w
	}
	ctx := context.Background()
	w, err := newWorkload(be.Prefix, tiers, lines, 1)
	if err != nil {
		tb.Fatal(err)
	}
	if err := w.warm(ctx, be.target.lib); err != nil {
		tb.Fatal(err)
	}
	if err := be.target.verify(ctx, w, verifySample); err != nil {
		tb.Fatal(err)
	}
	be.warmed[[2]int{tiers, lines}] = w
	return w
}

func implNamed(tb testing.TB, impls []impl, name string) impl {
	tb.Helper()
	for _, im := range impls {
		if im.name == name {
			return im
		}
	}
	tb.Fatalf("no impl %q", name)
	return impl{}
}

// runOp is the timed loop: setup is done, the first b.Loop resets the timer.
func runOp(b *testing.B, im impl) {
	ctx := context.Background()
	op := im.newOp()
	for i := 0; i < 20; i++ { // connections and first-touch, untimed
		if err := op(ctx, i); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := op(ctx, i); err != nil {
			b.Fatal(err)
		}
		i++
	}
	if im.lines > 1 {
		b.ReportMetric(float64(i*im.lines)/b.Elapsed().Seconds(), "lookups/s")
	}
}

// BenchmarkMatch is one lookup per op: the library's range match, the full
// scan anti-pattern, and raw go-redis issuing the library's command.
//
//	go test ./bench/internal/tiers -run '^$' -bench Match -count 10 > new.txt && benchstat new.txt
func BenchmarkMatch(b *testing.B) {
	backends := benchBackends(b)
	for _, tiers := range benchTiers {
		b.Run(fmt.Sprintf("tiers=%d", tiers), func(b *testing.B) {
			for _, name := range []string{implRange, implFullScan, implRaw} {
				b.Run("impl="+name, func(b *testing.B) {
					for _, be := range backends {
						b.Run("backend="+be.Name, func(b *testing.B) {
							w := be.workload(b, tiers, 1)
							runOp(b, implNamed(b, be.target.impls(w), name))
						})
					}
				})
			}
		})
	}
}

// BenchmarkCart is one cart per op: lines lookups, each on its own
// promotion of cartBenchTiers tiers, through MatchCart (impl=lib) and a
// raw go-redis pipeline of the same ZRANGEs (impl=raw).
func BenchmarkCart(b *testing.B) {
	backends := benchBackends(b)
	const lines = 20
	b.Run(fmt.Sprintf("lines=%d", lines), func(b *testing.B) {
		for _, impl := range []struct{ bench, name string }{{"lib", implCart}, {"raw", implRawCart}} {
			b.Run("impl="+impl.bench, func(b *testing.B) {
				for _, be := range backends {
					b.Run("backend="+be.Name, func(b *testing.B) {
						w := be.workload(b, cartBenchTiers, lines)
						runOp(b, implNamed(b, be.target.impls(w), impl.name))
					})
				}
			})
		}
	})
}

// TestFullScanAgreesWithRange shows that the compared impls do the same
// work: for many random values, including below the lowest and above the
// highest threshold, fullscan, range and raw give the oracle's tier.
func TestFullScanAgreesWithRange(t *testing.T) {
	t.Parallel()
	testredis.Each(t, func(t *testing.T, be *testredis.Backend) {
		lib, err := cache.New(be.Client, cache.Options{Prefix: be.Prefix, MinorDigits: minorDigits})
		if err != nil {
			t.Fatal(err)
		}
		tg := target{lib: lib, rc: be.Client}
		ctx := context.Background()
		// The full scan of 3000 tiers is slow under -race, so that case samples fewer values.
		for _, tc := range []struct{ tiers, values, verifySample int }{{1, 200, 10}, {3, 500, 10}, {30, 500, 10}, {300, 200, 10}, {3000, 15, 2}} {
			t.Run(fmt.Sprintf("tiers=%d", tc.tiers), func(t *testing.T) {
				w, err := newWorkload(be.Prefix, tc.tiers, 1, 42)
				if err != nil {
					t.Fatal(err)
				}
				if err := w.warm(ctx, lib); err != nil {
					t.Fatal(err)
				}
				members, err := tg.memberScores(ctx, w, 0)
				if err != nil {
					t.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(uint64(tc.tiers), 99))
				scores := w.matchers[0].Scores()
				top := scores[len(scores)-1] + 10000
				hits := 0
				for i := 0; i < tc.values; i++ {
					q := w.query(0, rng.Int64N(top))
					_, wantScore, wantOK, err := w.oracle(0, q.score)
					if err != nil {
						t.Fatal(err)
					}
					fh, ok, err := matchFullScan(ctx, be.Client, q.key, q.score)
					if err != nil {
						t.Fatal(err)
					}
					h, rerr := matchRange(ctx, lib, q.q)
					switch {
					case ok != wantOK:
						t.Fatalf("value %s: fullscan hit=%v, oracle hit=%v", q.q.Value, ok, wantOK)
					case !ok:
						if !isNoTier(rerr) || h != nil {
							t.Fatalf("value %s: below every tier, range gave %v, %v", q.q.Value, h, rerr)
						}
						continue
					case rerr != nil:
						t.Fatalf("value %s: range: %v", q.q.Value, rerr)
					case fh.Score != wantScore:
						t.Fatalf("value %s: fullscan picked score %d, oracle %d", q.q.Value, fh.Score, wantScore)
					}
					// Same tier: the member fullscan picked is the one raw returns, and range names the oracle's tier.
					raw, err := matchRaw(ctx, be.Client, &q)
					if err != nil {
						t.Fatal(err)
					}
					if raw != fh.Member || members[raw] != wantScore {
						t.Fatalf("value %s: raw returned another member than fullscan", q.q.Value)
					}
					wantID, _, _, _ := w.oracle(0, q.score)
					if h == nil || h.ID != wantID {
						t.Fatalf("value %s: range hit %v, oracle tier %s", q.q.Value, h, wantID)
					}
					if fh.Decoded.ID != wantID || fh.Decoded.Score != wantScore {
						t.Fatalf("value %s: fullscan decoded tier %s@%d, oracle %s@%d", q.q.Value, fh.Decoded.ID, fh.Decoded.Score, wantID, wantScore)
					}
					hits++
				}
				if hits == 0 {
					t.Fatal("no value hit a tier: the test compared nothing")
				}
				if err := tg.verify(ctx, w, tc.verifySample); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}

// TestVerifyCatchesDisagreement corrupts the warmed data behind the
// oracle's back: the bench's oracle check must refuse to measure.
func TestVerifyCatchesDisagreement(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		corrupt func(zs []redis.Z) []redis.Z // gets the tiers ascending, returns the ZADDs
	}{
		{"top tier moved", func(zs []redis.Z) []redis.Z {
			top := zs[len(zs)-1]
			top.Score++
			return []redis.Z{top}
		}},
		{"two tiers swapped", func(zs []redis.Z) []redis.Z {
			a, b := zs[4], zs[5]
			a.Score, b.Score = b.Score, a.Score
			return []redis.Z{a, b}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			testredis.Each(t, func(t *testing.T, be *testredis.Backend) {
				ctx := context.Background()
				lib, err := cache.New(be.Client, cache.Options{Prefix: be.Prefix, MinorDigits: minorDigits})
				if err != nil {
					t.Fatal(err)
				}
				tg := target{lib: lib, rc: be.Client}
				w, err := newWorkload(be.Prefix, 30, 2, 7)
				if err != nil {
					t.Fatal(err)
				}
				if err := w.warm(ctx, lib); err != nil {
					t.Fatal(err)
				}
				if err := tg.verify(ctx, w, 10); err != nil {
					t.Fatalf("clean data: %v", err)
				}
				zs, err := be.Client.ZRangeByScoreWithScores(ctx, w.keys[0], &redis.ZRangeBy{Min: score.Exclusive(0), Max: score.Exclusive(score.MaxExact)}).Result()
				if err != nil || len(zs) != 30 {
					t.Fatalf("read tiers: %d members, %v", len(zs), err)
				}
				if err := be.Client.ZAdd(ctx, w.keys[0], tc.corrupt(zs)...).Err(); err != nil {
					t.Fatal(err)
				}
				if err := tg.verify(ctx, w, 10); err == nil {
					t.Fatal("verify accepted corrupted tiers")
				} else {
					t.Logf("verify refused: %v", err)
				}
			})
		})
	}
}

// TestFloors checks the verdicts of the timing floors on synthetic runs:
// tight floors are met/missed, robust ones PASS/FAIL, a floor this run
// cannot evaluate is SKIP, and nothing is judged where timing is not.
func TestFloors(t *testing.T) {
	t.Parallel()
	mk := func(impl string, tiers, conc int, ops int64, p50 time.Duration) *stats {
		return &stats{Impl: impl, Tiers: tiers, Concurrency: conc, Lines: 1, Ops: ops, Wall: time.Second, rounds: []float64{float64(ops)}, lat: []time.Duration{p50}, roundP50: []time.Duration{p50}}
	}
	good := []*stats{
		mk(implRange, 3, 1, 950, 20*time.Microsecond), mk(implRaw, 3, 1, 1000, 19*time.Microsecond),
		mk(implFullScan, 3, 1, 900, 25*time.Microsecond), mk(implCart, 3, 1, 90, 0), mk(implRawCart, 3, 1, 100, 0),
		mk(implRange, 3000, 1, 940, 22*time.Microsecond), mk(implRaw, 3000, 1, 1000, 21*time.Microsecond),
		mk(implFullScan, 3000, 1, 30, 5*time.Millisecond), mk(implCart, 3000, 1, 86, 0), mk(implRawCart, 3000, 1, 100, 0),
	}
	met, missed, pass, fail, skip := measure.Met, measure.Missed, measure.Pass, measure.Fail, measure.Skipped
	tests := []struct {
		name   string
		rows   []*stats
		judged bool
		want   []measure.Status
	}{
		{"all pass", good, true, []measure.Status{met, met, pass, pass}},
		{"slow library", replace(good, mk(implRange, 3000, 1, 880, 22*time.Microsecond)), true, []measure.Status{missed, met, pass, pass}},
		{"slow cart", replace(good, mk(implCart, 3, 1, 84, 0)), true, []measure.Status{met, missed, pass, pass}},
		{"not flat", replace(good, mk(implRange, 3000, 1, 940, 27*time.Microsecond)), true, []measure.Status{met, met, fail, pass}},
		{"fullscan close", replace(good, mk(implFullScan, 3000, 1, 40, 500*time.Microsecond)), true, []measure.Status{met, met, pass, fail}},
		{"no 3000 tiers", good[:5], true, []measure.Status{met, met, skip, skip}},
		{"miniredis", replace(good, mk(implRange, 3000, 1, 940, 27*time.Microsecond)), false, []measure.Status{measure.NotJudged, measure.NotJudged, measure.NotJudged, measure.NotJudged}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &Result{Backend: "redis", Rows: tc.rows}
			var fs measure.Floors
			r.Floors(&fs, tc.judged, measure.NotRedis)
			if len(fs.Rows) != len(tc.want) {
				t.Fatalf("got %d floors, want %d: %+v", len(fs.Rows), len(tc.want), fs.Rows)
			}
			for i, f := range fs.Rows {
				if f.Status != tc.want[i] {
					t.Errorf("floor %q: %s (%s), want %s", f.Name, f.Status, f.Value, tc.want[i])
				}
			}
			failed := len(fs.Failures(true)) > 0
			wantFail := slices.Contains(tc.want, fail) || slices.Contains(tc.want, skip)
			if failed != wantFail {
				t.Errorf("Failures(strict) = %v, want failing %v", fs.Failures(true), wantFail)
			}
		})
	}
}

// TestWireFloors: the bytes and round-trip floors fail when a range read
// grows with the tier count, a full scan reads little, or a cart takes
// more than one round trip.
func TestWireFloors(t *testing.T) {
	t.Parallel()
	good := []wireRow{
		{Tiers: 3, RangeBytes: 80, FullScanBytes: 400, MatchTrips: 1, CartTrips: 1, CartTripsNode: 1, CartLines: 20},
		{Tiers: 3000, RangeBytes: 85, FullScanBytes: 250000, MatchTrips: 1, CartTrips: 1, CartTripsNode: 1, CartLines: 20},
	}
	with := func(i int, f func(*wireRow)) []wireRow {
		out := slices.Clone(good)
		f(&out[i])
		return out
	}
	tests := []struct {
		name    string
		backend string
		rows    []wireRow
		fail    []string // names of the rows that must FAIL
	}{
		{"good", "redis", good, nil},
		{"range grows", "redis", with(1, func(w *wireRow) { w.RangeBytes = 200 }), []string{"bytes read per lookup, range vs fullscan, 3000 tiers"}},
		{"fullscan small", "redis", with(1, func(w *wireRow) { w.FullScanBytes = 85 * 1000 }), []string{"bytes read per lookup, range vs fullscan, 3000 tiers"}},
		{"two trips a match", "miniredis", with(0, func(w *wireRow) { w.MatchTrips = 2 }), []string{"round trips per Match"}},
		{"cart split", "redis", with(1, func(w *wireRow) { w.CartTrips = 1.05 }), []string{"round trips per MatchCart of 20 lines"}},
		{"cluster cart on 3 masters", "cluster", with(1, func(w *wireRow) { w.CartTrips = 3 }), nil},
		{"cluster cart twice on a master", "cluster", with(1, func(w *wireRow) { w.CartTrips, w.CartTripsNode = 4, 2 }), []string{"round trips per MatchCart of 20 lines, per master"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &Result{Backend: tc.backend, Wire: tc.rows}
			var fs measure.Floors
			r.wireFloors(&fs)
			var got []string
			for _, f := range fs.Failures(true) {
				got = append(got, f.Name)
			}
			if !slices.Equal(got, tc.fail) {
				t.Errorf("failing rows %q, want %q (table %+v)", got, tc.fail, fs.Rows)
			}
		})
	}
}

// replace returns rows with the row of the same (impl, tiers, conc) as s swapped for s.
func replace(rows []*stats, s *stats) []*stats {
	out := make([]*stats, len(rows))
	for i, r := range rows {
		out[i] = r
		if r.Impl == s.Impl && r.Tiers == s.Tiers && r.Concurrency == s.Concurrency {
			out[i] = s
		}
	}
	return out
}

// TestP50RatioOutvotesAStalledRound: flatness is the median over rounds
// of the per-round p50 ratio, so one stalled round of one case does not
// decide it, while a case slower in every round does.
func TestP50RatioOutvotesAStalledRound(t *testing.T) {
	t.Parallel()
	us := func(xs ...int) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x) * time.Microsecond
		}
		return out
	}
	lo := &stats{Impl: implRange, Tiers: 3, Concurrency: 4, roundP50: us(100, 100, 100, 100)}
	for _, tc := range []struct {
		name string
		hi   []time.Duration
		want float64
	}{
		{"flat", us(100, 110, 90, 100), 1.0},
		{"one stalled round", us(100, 100, 400, 100), 1.0},
		{"slower every round", us(200, 210, 190, 200), 2.0},
		{"rounds do not pair", us(100, 100), math.NaN()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Result{Rows: []*stats{lo, {Impl: implRange, Tiers: 3000, Concurrency: 4, roundP50: tc.hi}}}
			got := r.p50Ratio(implRange, 3000, 3, 4)
			if math.IsNaN(tc.want) != math.IsNaN(got) || !math.IsNaN(got) && math.Abs(got-tc.want) > 1e-9 {
				t.Fatalf("p50Ratio = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestFlatnessFloorUsesPairedSample: with a paired sample the range
// flatness floor is judged on it, not on the cases measured apart.
func TestFlatnessFloorUsesPairedSample(t *testing.T) {
	t.Parallel()
	us := time.Microsecond
	rows := []*stats{
		{Impl: implRange, Tiers: 3, Concurrency: 4, lat: []time.Duration{100 * us}, roundP50: []time.Duration{100 * us}},
		{Impl: implRange, Tiers: 3000, Concurrency: 4, lat: []time.Duration{100 * us}, roundP50: []time.Duration{100 * us}},
	}
	for _, tc := range []struct {
		name string
		hi   time.Duration
		want measure.Status
	}{{"flat", 110 * us, measure.Pass}, {"not flat", 150 * us, measure.Fail}} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Result{Backend: "redis", Rows: rows, Flat: &pairedFlat{LoTiers: 3, HiTiers: 3000, Conc: 4, LoP50: 100 * us, HiP50: tc.hi, Ops: 2}}
			var fs measure.Floors
			r.Floors(&fs, true, "")
			for _, f := range fs.Rows {
				if strings.HasPrefix(f.Name, "range p50 flatness") {
					if f.Status != tc.want {
						t.Fatalf("%s: %s, want %s", f.Name, f.Status, tc.want)
					}
					return
				}
			}
			t.Fatal("no flatness floor")
		})
	}
}
