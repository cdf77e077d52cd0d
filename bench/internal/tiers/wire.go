package tiers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/internal/measure"
)

// wireRow is what one tier count costs on the wire, counted on a client of
// its own: bytes read per lookup and round trips per lookup and per cart.
// The same data gives the same replies on every server (up to how each
// encodes a score: a few per cent of a full scan), so these figures judge
// the access pattern on miniredis as on Redis.
type wireRow struct {
	Tiers         int
	RangeBytes    float64 // per Match
	FullScanBytes float64 // per full scan
	MatchTrips    float64 // per Match
	CartTrips     float64 // per MatchCart, all nodes
	CartTripsNode float64 // per MatchCart, on the busiest node
	CartLines     int
}

// Lookups per wire measurement: the counts are exact, so few are enough;
// the full scan of 3000 tiers is slow on miniredis.
const (
	wireLookups   = 100
	wireFullScans = 20
	wireCarts     = 20
)

func measureWire(ctx context.Context, cfg Config, w *workload) (wireRow, error) {
	row := wireRow{Tiers: w.tiers, CartLines: len(w.promos)}
	var bc measure.ByteCounter
	c, err := measure.ClientLike(cfg.Client, bc.Dialer)
	if err != nil {
		return row, err
	}
	defer c.Close()
	lib, err := cache.New(c, cache.Options{Prefix: cfg.Prefix, MinorDigits: minorDigits})
	if err != nil {
		return row, err
	}
	rt, err := measure.CountRoundTrips(ctx, c)
	if err != nil {
		return row, err
	}
	ims := target{lib: lib, rc: c}.impls(w)
	run := func(name string, n int) (bytes float64, trips, busiest float64, err error) {
		var op func(context.Context, int) error
		for _, im := range ims {
			if im.name == name {
				op = im.newOp()
			}
		}
		if op == nil {
			return 0, 0, 0, errors.New("bench: no impl " + name)
		}
		// Untimed first calls: connection handshakes (HELLO, CLIENT SETINFO) are read and counted too.
		for i := range 3 {
			if err := op(ctx, i); err != nil {
				return 0, 0, 0, err
			}
		}
		rt.Reset()
		before := bc.Read()
		for i := range n {
			if err := op(ctx, i); err != nil {
				return 0, 0, 0, err
			}
		}
		for _, v := range rt.PerNode() {
			busiest = max(busiest, float64(v)/float64(n))
		}
		return float64(bc.Read()-before) / float64(n), float64(rt.Total()) / float64(n), busiest, nil
	}
	if row.RangeBytes, row.MatchTrips, _, err = run(implRange, wireLookups); err != nil {
		return row, err
	}
	if row.FullScanBytes, _, _, err = run(implFullScan, wireFullScans); err != nil {
		return row, err
	}
	if _, row.CartTrips, row.CartTripsNode, err = run(implCart, wireCarts); err != nil {
		return row, err
	}
	return row, nil
}

// The wire floors: a range lookup reads about the same bytes at any tier
// count (one member comes back), a full scan reads every member with its
// score, so at least tiers/2 times as much; a Match is one round trip and a
// cart one per node it touches.
const wireFlatness = 1.5

func (r *Result) wireFloors(t *measure.Floors) {
	if len(r.Wire) == 0 {
		return
	}
	base := r.Wire[0]
	for _, w := range r.Wire {
		f := measure.Floor{Subject: "tiers", Kind: measure.Robust,
			Name:  fmt.Sprintf("bytes read per lookup, range vs fullscan, %d tiers", w.Tiers),
			Want:  fmt.Sprintf("range ≤ %.1f× its %d-tier bytes; fullscan ≥ %d× range", wireFlatness, base.Tiers, max(1, w.Tiers/2)),
			Value: fmt.Sprintf("range %.0f B, fullscan %s (%s)", w.RangeBytes, fmtBytes(w.FullScanBytes), fmtRatio(w.FullScanBytes/w.RangeBytes))}
		t.Judge(f, w.RangeBytes <= wireFlatness*base.RangeBytes && w.FullScanBytes >= float64(max(1, w.Tiers/2))*w.RangeBytes)
	}
	var worstMatch, worstCart, worstNode float64
	for _, w := range r.Wire {
		worstMatch, worstCart, worstNode = max(worstMatch, w.MatchTrips), max(worstCart, w.CartTrips), max(worstNode, w.CartTripsNode)
	}
	t.Judge(measure.Floor{Subject: "tiers", Kind: measure.Robust, Name: "round trips per Match", Want: "= 1",
		Value: fmt.Sprintf("%.2f", worstMatch), Note: "worst tier count"}, worstMatch == 1)
	name := fmt.Sprintf("round trips per MatchCart of %d lines", r.Wire[0].CartLines)
	if r.Backend == "cluster" {
		t.Judge(measure.Floor{Subject: "tiers", Kind: measure.Robust, Name: name + ", per master", Want: "≤ 1",
			Value: fmt.Sprintf("%.2f (all masters %.2f)", worstNode, worstCart), Note: "worst tier count"}, worstNode <= 1)
		return
	}
	t.Judge(measure.Floor{Subject: "tiers", Kind: measure.Robust, Name: name, Want: "= 1",
		Value: fmt.Sprintf("%.2f", worstCart), Note: "worst tier count"}, worstCart == 1)
}

// AllFloors adds the wire floors (judged on every backend) and the timing
// floors (judged only when timing is, see Floors) to t.
func (r *Result) AllFloors(t *measure.Floors, timingJudged bool, why string) {
	r.wireFloors(t)
	r.Floors(t, timingJudged, why)
	r.NearFloors(t, timingJudged, why)
}

// printWire prints the wire table.
func (r *Result) printWire(w io.Writer) {
	fmt.Fprintln(w, "\nwire, per lookup (counted on a client of its own; within a few per cent on every server for the same data):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tiers\trange B\tfullscan B\tfullscan/range\tround trips/Match\tround trips/cart\t")
	for _, x := range r.Wire {
		fmt.Fprintf(tw, "%d\t%.0f\t%.0f\t%s\t%.2f\t%.2f\t\n", x.Tiers, x.RangeBytes, x.FullScanBytes, fmtRatio(x.FullScanBytes/x.RangeBytes), x.MatchTrips, x.CartTrips)
	}
	tw.Flush()
}

func fmtBytes(b float64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}
