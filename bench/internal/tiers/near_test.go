package tiers

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/measure"
	"github.com/tierset/tierset/internal/testredis"
)

// TestNearFloors checks the near floors' verdicts on synthetic runs: a
// row not served from memory fails the run whatever its speed, the speed
// floors are on p50 (robust near/raw and flatness, tight cart), and
// nothing is judged, nor fails -strict, where there are no near rows
// because the backend has no client tracking.
func TestNearFloors(t *testing.T) {
	t.Parallel()
	mk := func(impl string, tiers, lines int, p50 time.Duration, valid bool) *stats {
		s := &stats{Impl: impl, Tiers: tiers, Concurrency: 1, Lines: lines, Ops: 1000, Wall: time.Second,
			rounds: []float64{1000}, lat: []time.Duration{p50}, roundP50: []time.Duration{p50}, hitsCounted: impl == implNear || impl == implNearCart}
		if s.hitsCounted {
			s.hits = s.Ops * int64(lines)
			if !valid {
				s.hits--
			}
			s.checkServed()
		}
		return s
	}
	us := time.Microsecond
	good := []*stats{
		mk(implRaw, 3, 1, 20*us, true), mk(implRawCart, 3, 20, 60*us, true),
		mk(implNear, 3, 1, 300, true), mk(implNearCart, 3, 20, 2*us, true),
		mk(implRaw, 3000, 1, 21*us, true), mk(implRawCart, 3000, 20, 70*us, true),
		mk(implNear, 3000, 1, 400, true), mk(implNearCart, 3000, 20, 3*us, true),
	}
	pass, fail, skip, nj := measure.Pass, measure.Fail, measure.Skipped, measure.NotJudged
	tests := []struct {
		name    string
		rows    []*stats
		judged  bool
		skipped string // Result.NearSkipped
		want    []measure.Status
	}{
		{"all pass", good, true, "", []measure.Status{pass, pass, pass, pass}},
		{"a row served by Redis", replace(good, mk(implNear, 3000, 1, 400, false)), true, "", []measure.Status{fail, fail, fail, fail}},
		{"invalid, timing not judged", replace(good, mk(implNearCart, 3, 20, 2*us, false)), false, "", []measure.Status{fail, nj, nj, nj}},
		{"near slow", replace(good, mk(implNear, 3000, 1, time.Microsecond, true)), true, "", []measure.Status{pass, fail, pass, fail}},
		{"cart slow", replace(good, mk(implNearCart, 3000, 20, 5*us, true)), true, "", []measure.Status{pass, pass, fail, pass}},
		{"not flat", replace(good, mk(implNear, 3000, 1, 650, true)), true, "", []measure.Status{pass, pass, pass, fail}},
		{"no 3000 tiers", good[:4], true, "", []measure.Status{pass, pass, pass, skip}},
		{"no near rows", good[:2], true, "", []measure.Status{skip, skip, skip, skip}},
		{"miniredis", good[:2], false, nearSkipped("miniredis"), []measure.Status{nj, nj, nj, nj}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &Result{Backend: "redis", Rows: tc.rows, Lines: 20, NearSkipped: tc.skipped}
			var fs measure.Floors
			r.NearFloors(&fs, tc.judged, measure.NotRedis)
			if len(fs.Rows) != len(tc.want) {
				t.Fatalf("got %d floors, want %d: %+v", len(fs.Rows), len(tc.want), fs.Rows)
			}
			for i, f := range fs.Rows {
				if f.Status != tc.want[i] {
					t.Errorf("floor %q: %s (%s, %s), want %s", f.Name, f.Status, f.Value, f.Note, tc.want[i])
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

// TestNearRows runs the tier benchmark end to end: on a real server it has
// near and nearcart rows whose every timed lookup was a near hit (their
// answers checked against the oracle first); on miniredis it has none and
// says why.
func TestNearRows(t *testing.T) {
	t.Parallel()
	testredis.Each(t, func(t *testing.T, be *testredis.Backend) {
		var log strings.Builder
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := Run(ctx, Config{Client: be.Client, Backend: backendName(be), Prefix: be.Prefix, Tiers: []int{3, 300},
			Conc: []int{1}, Duration: 50 * time.Millisecond, Lines: 5, Seed: 3, Log: &log})
		if err != nil {
			t.Fatalf("Run: %v\n%s", err, log.String())
		}
		var near []*stats
		for _, s := range res.Rows {
			if s.hitsCounted {
				near = append(near, s)
			}
		}
		if !be.Real() {
			if len(near) != 0 || res.NearSkipped == "" || !strings.Contains(log.String(), "skipped on miniredis") {
				t.Fatalf("miniredis: %d near rows, skipped %q, log:\n%s", len(near), res.NearSkipped, log.String())
			}
			return
		}
		if len(near) != 4 {
			t.Fatalf("%d near rows, want near and nearcart at 2 tier counts", len(near))
		}
		for _, s := range near {
			if s.Ops == 0 || s.invalid != "" || s.hits < s.Ops*int64(s.Lines) {
				t.Errorf("%s tiers=%d: %d ops × %d lines, %d near hits, invalid %q", s.Impl, s.Tiers, s.Ops, s.Lines, s.hits, s.invalid)
			}
		}
		res.PrintTable(io.Discard)
	})
}

// backendName is the bench's name for a test backend.
func backendName(be *testredis.Backend) string {
	switch {
	case !be.Real():
		return "miniredis"
	case be.IsCluster():
		return "cluster"
	}
	return "redis"
}

// TestConvergeFloor checks the convergence floor's verdicts: robust
// (failing -strict), judged only on a single Redis, not judged where the
// near cache cannot run.
func TestConvergeFloor(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	for _, tc := range []struct {
		name    string
		c       *Convergence
		backend string
		judged  bool
		want    measure.Status
	}{
		{"fast", &Convergence{P50: ms / 5, P99: 2 * ms, Max: 3 * ms}, "redis", true, measure.Pass},
		{"slow", &Convergence{P50: ms, P99: 6 * ms, Max: 9 * ms}, "redis", true, measure.Fail},
		{"cluster", &Convergence{P99: 2 * ms}, "cluster", false, measure.NotJudged},
		{"miniredis", nil, "miniredis", false, measure.NotJudged},
		{"not run", nil, "redis", true, measure.Skipped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fs measure.Floors
			ConvergeFloor(&fs, tc.c, tc.backend, tc.judged, measure.NotRedis)
			if len(fs.Rows) != 1 || fs.Rows[0].Status != tc.want {
				t.Fatalf("rows %+v, want one %s", fs.Rows, tc.want)
			}
		})
	}
}

// TestConvergenceRun runs the convergence run on a real server: every
// refresh is seen by every reader (else it fails), with one sample per
// reader and refresh.
func TestConvergenceRun(t *testing.T) {
	t.Parallel()
	testredis.EachReal(t, func(t *testing.T, be *testredis.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var log strings.Builder
		c, err := RunConvergence(ctx, Config{Client: be.Client, Backend: backendName(be), Prefix: be.Prefix, Log: &log})
		if err != nil {
			t.Fatalf("RunConvergence: %v\n%s", err, log.String())
		}
		if c == nil || c.Readers != convergeCaches*convergeReaders || c.Refreshes != convergeRefreshes || c.Reads < int64(c.Readers*c.Refreshes) ||
			c.P50 > c.P99 || c.P99 > c.Max || c.Max > convergeTimeout || c.FirstP50 > c.FirstP99 || c.FirstP99 > c.FirstMax ||
			c.FirstMax > convergeTimeout {
			t.Fatalf("convergence %+v", c)
		}
		t.Logf("stale window p50 %v p99 %v max %v; first new read p50 %v p99 %v max %v; %d reads", c.P50, c.P99, c.Max,
			c.FirstP50, c.FirstP99, c.FirstMax, c.Reads)
		keys, err := testredis.Keys(ctx, be.Client, be.Prefix)
		if err != nil || len(keys) != 0 {
			t.Fatalf("left keys %v %v", keys, err)
		}
	})
}
