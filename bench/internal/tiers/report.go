package tiers

import (
	"encoding/csv"
	"fmt"
	"github.com/tierset/tierset/internal/measure"
	"io"
	"math"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"
)

// Result is everything one invocation measured, plus what describes it.
type Result struct {
	Backend     string // miniredis, redis, cluster
	BackendNote string // address, server version, caveats
	GoVersion   string
	GOMAXPROCS  int
	NumCPU      int
	Date        time.Time
	Duration    time.Duration
	Lines       int
	Rows        []*stats
	Wire        []wireRow   // one per tier count
	NearSkipped string      // why there are no near rows ("" when there are)
	Flat        *pairedFlat // range at 3000 tiers against 3, paired; nil when not measured
}

// implOrder is the row order within a case.
var implOrder = []string{implRange, implRaw, implFullScan, implCart, implRawCart, implNear, implNearCart}

func (r *Result) find(impl string, tiers, conc int) *stats {
	for _, s := range r.Rows {
		if s.Impl == impl && s.Tiers == tiers && s.Concurrency == conc {
			return s
		}
	}
	return nil
}

// ordered returns the rows in table order: by concurrency, then tier
// count, then implementation as implOrder lists them.
func (r *Result) ordered() []*stats {
	var out []*stats
	for _, conc := range r.concurrencies() {
		for _, tiers := range r.tierCounts() {
			for _, impl := range implOrder {
				if s := r.find(impl, tiers, conc); s != nil {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

func (r *Result) tierCounts() []int { return r.distinct(func(s *stats) int { return s.Tiers }) }

func (r *Result) concurrencies() []int {
	return r.distinct(func(s *stats) int { return s.Concurrency })
}

// distinct returns the sorted distinct values of field over the rows.
func (r *Result) distinct(field func(*stats) int) []int {
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
func (r *Result) ratio(a, b string, tiers, conc int) float64 {
	x, y := r.find(a, tiers, conc), r.find(b, tiers, conc)
	if x == nil || y == nil {
		return math.NaN()
	}
	return pairedRatio(x, y)
}

// p50Ratio is impl's p50 at hiTiers over its p50 at loTiers: the median
// over rounds of the ratio of the two cases' p50s in the same round, so a
// stall that slows one case for a round or two does not decide it.
func (r *Result) p50Ratio(impl string, hiTiers, loTiers, conc int) float64 {
	hi, lo := r.find(impl, hiTiers, conc), r.find(impl, loTiers, conc)
	if hi == nil || lo == nil || len(hi.roundP50) == 0 || len(hi.roundP50) != len(lo.roundP50) {
		return math.NaN()
	}
	x := make([]float64, 0, len(hi.roundP50))
	for k, l := range lo.roundP50 {
		if l > 0 {
			x = append(x, float64(hi.roundP50[k])/float64(l))
		}
	}
	return median(x)
}

func fmtDur(d time.Duration) string {
	us := float64(d) / float64(time.Microsecond)
	switch {
	case us < 1: // a near-cache lookup
		return strconv.FormatFloat(float64(d), 'f', 0, 64) + "ns"
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

// PrintHeader says what ran where.
func (r *Result) PrintHeader(w io.Writer) {
	fmt.Fprintf(w, "tierset bench  %s  %s  GOMAXPROCS=%d  NumCPU=%d\n",
		r.Date.Format(time.RFC3339), r.GoVersion, r.GOMAXPROCS, r.NumCPU)
}

// PrintTable prints one row per case, the ratios and the wire figures.
func (r *Result) PrintTable(w io.Writer) {
	if r.Backend == "miniredis" {
		fmt.Fprintln(w, "\ntimings below measure miniredis, which sorts a whole set on every ZRANGE: they say nothing about Redis")
	}
	fmt.Fprintf(w, "\n%s per case, all cases interleaved in rounds of ~%s; ops/s = all ops / time; p50/p99 over every op\n", r.Duration, roundLength)
	fmt.Fprintf(w, "cart = %d lines, each on its own promotion of that tier count; lookups/s = lines × carts/s\n\n", r.Lines)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "impl\ttiers\tconc\tops/s\tlookups/s\tp50\tp99\tops\tallocs/line\t")
	for _, s := range r.ordered() {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%d\t%.2f\t\n", s.Impl, s.Tiers, s.Concurrency,
			fmtRate(s.OpsPerSec()), fmtRate(s.LookupsPerSec()), fmtDur(s.Quantile(0.5)), fmtDur(s.Quantile(0.99)), s.Ops, s.AllocsPerLine())
	}
	tw.Flush()
	for _, s := range r.Rows {
		if s.invalid != "" {
			fmt.Fprintf(w, "INVALID row %s tiers=%d conc=%d: %s\n", s.Impl, s.Tiers, s.Concurrency, s.invalid)
		}
	}
	if r.NearSkipped != "" {
		fmt.Fprintf(w, "no %s/%s rows on %s: %s\n", implNear, implNearCart, r.Backend, r.NearSkipped)
	}

	fmt.Fprintln(w, "\nratios of ops/s (median over rounds of the ratio within a round, where the pair ran back to back):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "conc\ttiers\trange/raw\tcart/rawcart\trange/fullscan\tnear/raw\tnearcart/rawcart\t")
	for _, conc := range r.concurrencies() {
		for _, tiers := range r.tierCounts() {
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t\n", conc, tiers,
				fmtRatio(r.ratio(implRange, implRaw, tiers, conc)),
				fmtRatio(r.ratio(implCart, implRawCart, tiers, conc)),
				fmtRatio(r.ratio(implRange, implFullScan, tiers, conc)),
				fmtRatio(r.ratio(implNear, implRaw, tiers, conc)),
				fmtRatio(r.ratio(implNearCart, implRawCart, tiers, conc)))
		}
	}
	tw.Flush()
	tc := r.tierCounts()
	if len(tc) >= 2 {
		lo, hi := tc[0], tc[len(tc)-1]
		for _, conc := range r.concurrencies() {
			for _, impl := range []string{implRange, implNear} {
				if x := r.p50Ratio(impl, hi, lo, conc); !math.IsNaN(x) {
					fmt.Fprintf(w, "%s p50(%d tiers)/p50(%d tiers), conc %d: %s\n", impl, hi, lo, conc, fmtRatio(x))
				}
			}
		}
	}
	r.printWire(w)
}

// The tier floors. Robust ones hold with a wide margin on a shared 2-core
// machine and fail -strict; tight ones are within its noise and only print.
const (
	floorRangeVsRaw    = 0.90 // tight
	floorCartVsRawCart = 0.85 // tight
	floorFlatness      = 1.30 // robust
	floorVsFullScan    = 25.0 // robust
)

// Floors adds the timing floors of r to t. They are judged only where
// timing means something (judged false: on miniredis, why says so). The
// two overhead floors must hold at every measured tier count and
// concurrency (the worst case is shown); flatness and the full-scan lead
// are judged at 3 and 3000 tiers with the most clients measured.
func (r *Result) Floors(t *measure.Floors, judged bool, why string) {
	worst := r.worstRatio
	add, skip := tierJudges(t, judged, why)
	f := measure.Floor{Name: "library Match vs raw go-redis, ops/s (worst case)", Want: fmt.Sprintf("≥ %.2f×", floorRangeVsRaw), Kind: measure.Tight}
	if w, where := worst(implRange, implRaw); !math.IsInf(w, 1) {
		f.Value, f.Note = fmt.Sprintf("%.3f×", w), where
		add(f, w >= floorRangeVsRaw)
	} else {
		skip(f, "no range/raw rows")
	}
	f = measure.Floor{Name: "MatchCart vs raw pipeline, ops/s (worst case)", Want: fmt.Sprintf("≥ %.2f×", floorCartVsRawCart), Kind: measure.Tight}
	if w, where := worst(implCart, implRawCart); !math.IsInf(w, 1) {
		f.Value, f.Note = fmt.Sprintf("%.3f×", w), where
		add(f, w >= floorCartVsRawCart)
	} else {
		skip(f, "no cart/rawcart rows")
	}
	// Judged with the most clients measured: one client's loopback round
	// trip is bimodal (fast, or several times slower for every op of a
	// case when client and server each sleep on their own core), so with
	// one client a p50 says which mode a case drew; with the cores kept
	// busy there is one mode (docs/benchmarks.md).
	// The sample is paired op by op (Result.Flat): the two cases measured
	// apart, even in the same rounds, drew different moments of a shared
	// machine, and their ratio moved past the floor in some runs.
	conc := r.maxConcurrency()
	f = measure.Floor{Name: fmt.Sprintf("range p50 flatness, 3000 tiers / 3 tiers, %d clients, paired", conc), Want: fmt.Sprintf("≤ %.2f×", floorFlatness), Kind: measure.Robust}
	if x := r.p50Ratio(implRange, 3000, 3, conc); math.IsNaN(x) {
		skip(f, "needs -tiers with 3 and 3000")
	} else if p := r.Flat; p != nil {
		f.Value = fmt.Sprintf("%.3f×", p.Ratio())
		f.Note = fmt.Sprintf("p50 %s vs %s over %d ops; measured apart: %s (%d clients), %s (1 client)", fmtDur(p.HiP50), fmtDur(p.LoP50), p.Ops,
			fmtRatio(x), conc, fmtRatio(r.p50Ratio(implRange, 3000, 3, 1)))
		add(f, p.Ratio() <= floorFlatness)
	} else {
		f.Value = fmt.Sprintf("%.3f×", x)
		f.Note = fmt.Sprintf("p50 %s vs %s; 1 client: %s", fmtDur(r.find(implRange, 3000, conc).Quantile(0.5)), fmtDur(r.find(implRange, 3, conc).Quantile(0.5)),
			fmtRatio(r.p50Ratio(implRange, 3000, 3, 1)))
		add(f, x <= floorFlatness)
	}
	// On p50, not ops/s: ops/s is a mean, which one stall of a shared
	// machine during the range rounds moves; the p50s do not move.
	f = measure.Floor{Name: fmt.Sprintf("range vs fullscan p50 speed-up at 3000 tiers, %d clients", conc), Want: fmt.Sprintf("≥ %.0f×", floorVsFullScan), Kind: measure.Robust}
	rg, fs := r.find(implRange, 3000, conc), r.find(implFullScan, 3000, conc)
	if rg == nil || fs == nil || rg.Quantile(0.5) <= 0 {
		skip(f, "needs -tiers with 3000")
	} else {
		x := float64(fs.Quantile(0.5)) / float64(rg.Quantile(0.5))
		f.Value = fmtRatio(x)
		f.Note = fmt.Sprintf("p50 %s vs %s; ops/s ratio %s", fmtDur(fs.Quantile(0.5)), fmtDur(rg.Quantile(0.5)), fmtRatio(r.ratio(implRange, implFullScan, 3000, conc)))
		add(f, x >= floorVsFullScan)
	}
}

// maxConcurrency is the most clients any row was measured with.
func (r *Result) maxConcurrency() int {
	m := 1
	for _, s := range r.Rows {
		m = max(m, s.Concurrency)
	}
	return m
}

// worstRatio is the lowest a/b ratio (see ratio) over every measured tier
// count and concurrency, and where it was; +Inf when no pair was measured.
func (r *Result) worstRatio(a, b string) (float64, string) {
	w, where := math.Inf(1), ""
	for _, conc := range r.concurrencies() {
		for _, tiers := range r.tierCounts() {
			if x := r.ratio(a, b, tiers, conc); !math.IsNaN(x) && x < w {
				w, where = x, fmt.Sprintf("at tiers=%d conc=%d", tiers, conc)
			}
		}
	}
	return w, where
}

// tierJudges returns how a tier floor is added to t: add judges it (when
// judged, else not judged, why), skip records that this run could not
// measure it (not judged instead when nothing is judged here anyway, so
// -strict has no reason to fail).
func tierJudges(t *measure.Floors, judged bool, why string) (add func(measure.Floor, bool), skip func(measure.Floor, string)) {
	add = func(f measure.Floor, ok bool) {
		f.Subject = "tiers"
		t.JudgeIf(judged, why, f, ok)
	}
	skip = func(f measure.Floor, missing string) {
		f.Subject = "tiers"
		if !judged {
			t.JudgeIf(false, why, f, false)
			return
		}
		t.Skip(f, missing)
	}
	return add, skip
}

// csvHeader is the CSV schema; one row per table row.
var csvHeader = []string{"backend", "impl", "tiers", "concurrency", "lines", "ops", "seconds",
	"ops_per_s", "lookups_per_s", "p50_us", "p99_us", "go", "gomaxprocs", "date", "allocs_per_line", "invalid"}

func (r *Result) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	us := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d)/float64(time.Microsecond), 'f', 2, 64)
	}
	for _, s := range r.ordered() {
		err := cw.Write([]string{r.Backend, s.Impl, strconv.Itoa(s.Tiers), strconv.Itoa(s.Concurrency),
			strconv.Itoa(s.Lines), strconv.FormatInt(s.Ops, 10), strconv.FormatFloat(s.Wall.Seconds(), 'f', 3, 64),
			strconv.FormatFloat(s.OpsPerSec(), 'f', 1, 64),
			strconv.FormatFloat(s.LookupsPerSec(), 'f', 1, 64),
			us(s.Quantile(0.5)), us(s.Quantile(0.99)), r.GoVersion, strconv.Itoa(r.GOMAXPROCS), r.Date.Format(time.RFC3339),
			strconv.FormatFloat(s.AllocsPerLine(), 'f', 2, 64), s.invalid})
		if err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
