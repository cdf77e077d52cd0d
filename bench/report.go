package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"
)

// run is everything one invocation measured, plus what describes it.
type run struct {
	Backend     string // miniredis, redis, cluster
	BackendNote string // address, server version, caveats
	GoVersion   string
	GOMAXPROCS  int
	NumCPU      int
	Date        time.Time
	Duration    time.Duration
	Lines       int
	Rows        []*stats
}

// implOrder is the row order within a case.
var implOrder = []string{implRange, implRaw, implFullScan, implCart, implRawCart}

func (r *run) find(impl string, tiers, conc int) *stats {
	for _, s := range r.Rows {
		if s.Impl == impl && s.Tiers == tiers && s.Concurrency == conc {
			return s
		}
	}
	return nil
}

func (r *run) tierCounts() []int { return r.distinct(func(s *stats) int { return s.Tiers }) }

func (r *run) concurrencies() []int { return r.distinct(func(s *stats) int { return s.Concurrency }) }

// distinct returns the sorted distinct values of field over the rows.
func (r *run) distinct(field func(*stats) int) []int {
	var out []int
	for _, s := range r.Rows {
		if v := field(s); !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// ratio is a/b on ops/s, paired by round (see pairedRatio), NaN when
// either side is missing.
func (r *run) ratio(a, b string, tiers, conc int) float64 {
	x, y := r.find(a, tiers, conc), r.find(b, tiers, conc)
	if x == nil || y == nil {
		return math.NaN()
	}
	return pairedRatio(x, y)
}

// p50Ratio is range's p50 at the highest tier count over the lowest.
func (r *run) p50Ratio(hiTiers, loTiers, conc int) float64 {
	hi, lo := r.find(implRange, hiTiers, conc), r.find(implRange, loTiers, conc)
	if hi == nil || lo == nil || lo.Quantile(0.5) == 0 {
		return math.NaN()
	}
	return float64(hi.Quantile(0.5)) / float64(lo.Quantile(0.5))
}

func fmtDur(d time.Duration) string {
	us := float64(d) / float64(time.Microsecond)
	switch {
	case us >= 10000:
		return strconv.FormatFloat(us/1000, 'f', 1, 64) + "ms"
	case us >= 1000:
		return strconv.FormatFloat(us/1000, 'f', 2, 64) + "ms"
	default:
		return strconv.FormatFloat(us, 'f', 1, 64) + "µs"
	}
}

func fmtRatio(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	if x >= 100 {
		return strconv.FormatFloat(x, 'f', 0, 64) + "×"
	}
	return strconv.FormatFloat(x, 'f', 2, 64) + "×"
}

func fmtRate(x float64) string { return strconv.FormatFloat(x, 'f', 0, 64) }

// printHeader says what ran where.
func (r *run) printHeader(w io.Writer) {
	fmt.Fprintf(w, "tierset bench  %s  %s  GOMAXPROCS=%d  NumCPU=%d\n",
		r.Date.Format(time.RFC3339), r.GoVersion, r.GOMAXPROCS, r.NumCPU)
	fmt.Fprintf(w, "backend=%s  %s\n", r.Backend, r.BackendNote)
}

// printTable prints one row per case and the ratios.
func (r *run) printTable(w io.Writer) {
	fmt.Fprintf(w, "\n%s per case, all cases interleaved in rounds of ~%s; ops/s = all ops / time; p50/p99 over every op\n", r.Duration, roundLength)
	fmt.Fprintf(w, "cart = %d lines, each on its own promotion of that tier count; lookups/s = lines × carts/s\n\n", r.Lines)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "impl\ttiers\tconc\tops/s\tlookups/s\tp50\tp99\tops\t")
	for _, conc := range r.concurrencies() {
		for _, tiers := range r.tierCounts() {
			for _, impl := range implOrder {
				s := r.find(impl, tiers, conc)
				if s == nil {
					continue
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%d\t\n", s.Impl, s.Tiers, s.Concurrency,
					fmtRate(s.OpsPerSec()), fmtRate(s.LookupsPerSec()), fmtDur(s.Quantile(0.5)), fmtDur(s.Quantile(0.99)), s.Ops)
			}
		}
	}
	tw.Flush()

	fmt.Fprintln(w, "\nratios of ops/s (median over rounds of the ratio within a round, where the pair ran back to back):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "conc\ttiers\trange/raw\tcart/rawcart\trange/fullscan\t")
	for _, conc := range r.concurrencies() {
		for _, tiers := range r.tierCounts() {
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t\n", conc, tiers,
				fmtRatio(r.ratio(implRange, implRaw, tiers, conc)),
				fmtRatio(r.ratio(implCart, implRawCart, tiers, conc)),
				fmtRatio(r.ratio(implRange, implFullScan, tiers, conc)))
		}
	}
	tw.Flush()
	tc := r.tierCounts()
	if len(tc) >= 2 {
		lo, hi := tc[0], tc[len(tc)-1]
		for _, conc := range r.concurrencies() {
			fmt.Fprintf(w, "range p50(%d tiers)/p50(%d tiers), conc %d: %s\n", hi, lo, conc, fmtRatio(r.p50Ratio(hi, lo, conc)))
		}
	}
}

// floor is one of the tier engine issue's floors, evaluated on one run.
type floor struct {
	Name   string
	Status string // PASS, FAIL, SKIP
	Detail string
}

// Floors of issue 2, as ratios within one run.
const (
	floorRangeVsRaw    = 0.90
	floorCartVsRawCart = 0.85
	floorP50Flatness   = 1.15
	floorVsFullScan    = 25.0
)

// floors evaluates the floors. The two overhead floors must hold
// at every measured tier count and concurrency (the worst case is shown);
// the flatness and full-scan floors are defined for 1 client at 3 and
// 3000 tiers.
func (r *run) floors() []floor {
	var out []floor
	worst := func(a, b string) (float64, string) {
		w, where := math.Inf(1), ""
		for _, conc := range r.concurrencies() {
			for _, tiers := range r.tierCounts() {
				if x := r.ratio(a, b, tiers, conc); !math.IsNaN(x) && x < w {
					w, where = x, fmt.Sprintf("tiers=%d conc=%d", tiers, conc)
				}
			}
		}
		return w, where
	}
	add := func(name string, ok bool, detail string) {
		st := "PASS"
		if !ok {
			st = "FAIL"
		}
		out = append(out, floor{name, st, detail})
	}
	skip := func(name, why string) { out = append(out, floor{name, "SKIP", why}) }

	if w, where := worst(implRange, implRaw); !math.IsInf(w, 1) {
		add(fmt.Sprintf("library match ≥ %.2f× raw go-redis", floorRangeVsRaw), w >= floorRangeVsRaw, fmt.Sprintf("worst %.3f× at %s", w, where))
	}
	if w, where := worst(implCart, implRawCart); !math.IsInf(w, 1) {
		add(fmt.Sprintf("cart match ≥ %.2f× raw pipeline", floorCartVsRawCart), w >= floorCartVsRawCart, fmt.Sprintf("worst %.3f× at %s", w, where))
	}
	name := fmt.Sprintf("range p50 at 3000 tiers ≤ %.2f× p50 at 3 tiers, 1 client", floorP50Flatness)
	if x := r.p50Ratio(3000, 3, 1); math.IsNaN(x) {
		skip(name, "needs -tiers with 3 and 3000 and -concurrency with 1")
	} else {
		add(name, x <= floorP50Flatness, fmt.Sprintf("%.3f× (%s vs %s)", x,
			fmtDur(r.find(implRange, 3000, 1).Quantile(0.5)), fmtDur(r.find(implRange, 3, 1).Quantile(0.5))))
	}
	name = fmt.Sprintf("range ≥ %.0f× fullscan at 3000 tiers, 1 client", floorVsFullScan)
	if x := r.ratio(implRange, implFullScan, 3000, 1); math.IsNaN(x) {
		skip(name, "needs -tiers with 3000 and -concurrency with 1")
	} else {
		add(name, x >= floorVsFullScan, fmtRatio(x))
	}
	return out
}

func (r *run) printFloors(w io.Writer, fs []floor) {
	note := "real Redis: these are the issue's floors"
	switch r.Backend {
	case "miniredis":
		note = "miniredis: for information only, the floors are defined on real Redis"
	case "cluster":
		note = "cluster: for information, the floors are defined on a single real Redis"
	}
	fmt.Fprintf(w, "\nfloors (issue 2; ratios in this run; %s):\n", note)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range fs {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", f.Status, f.Name, f.Detail)
	}
	tw.Flush()
}

// csvHeader is the CSV schema; one row per table row.
var csvHeader = []string{"backend", "impl", "tiers", "concurrency", "lines", "ops", "seconds",
	"ops_per_s", "lookups_per_s", "p50_us", "p99_us", "go", "gomaxprocs", "date"}

func (r *run) writeCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	us := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d)/float64(time.Microsecond), 'f', 2, 64)
	}
	for _, conc := range r.concurrencies() {
		for _, tiers := range r.tierCounts() {
			for _, impl := range implOrder {
				s := r.find(impl, tiers, conc)
				if s == nil {
					continue
				}
				err := cw.Write([]string{r.Backend, s.Impl, strconv.Itoa(s.Tiers), strconv.Itoa(s.Concurrency),
					strconv.Itoa(s.Lines), strconv.FormatInt(s.Ops, 10), strconv.FormatFloat(s.Wall.Seconds(), 'f', 3, 64),
					strconv.FormatFloat(s.OpsPerSec(), 'f', 1, 64),
					strconv.FormatFloat(s.LookupsPerSec(), 'f', 1, 64),
					us(s.Quantile(0.5)), us(s.Quantile(0.99)), r.GoVersion, strconv.Itoa(r.GOMAXPROCS), r.Date.Format(time.RFC3339)})
				if err != nil {
					return err
				}
			}
		}
	}
	cw.Flush()
	return cw.Error()
}
