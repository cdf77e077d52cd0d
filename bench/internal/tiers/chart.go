package tiers

// The chart is written by hand with the standard library. A plotting
// library (gonum/plot and its font and image dependencies) would roughly
// double go.mod for one log-log line chart of three series; about 200
// lines of SVG are cheaper to keep and have no dependency to pin.

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"time"
)

// chartSeries are the impls drawn, with their colour, dash pattern and marker.
var chartSeries = []struct {
	impl, label, color, dash, marker string
}{
	{implFullScan, "fullscan (ZRANGE 0 -1, decode all, pick in Go)", "#d62728", "", "square"},
	{implRange, "range (library Match, ZRANGE BYSCORE REV LIMIT 0 1)", "#1f77b4", "", "circle"},
	{implRaw, "raw go-redis, same ZRANGE, no decode", "#2ca02c", "6,4", "triangle"},
	{implNear, "near (library Match, Options.NearCache: the ladder held in process)", "#9467bd", "", "diamond"},
}

// Chart geometry, in SVG user units.
const (
	chartW, chartH             = 900.0, 580.0
	plotX0, plotX1             = 90.0, 860.0
	plotY0, plotY1             = 78.0, 420.0
	legendY0                   = 478.0
	chartFont                  = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\""
	minorGrid, majorGrid, axis = "#eeeeee", "#cccccc", "#333333"
)

// WriteChart draws p50 latency (log Y) against tier count (log X) for
// range, fullscan, raw and near at concurrency conc.
func (r *Result) WriteChart(w io.Writer, conc int) error {
	tiers := r.tierCounts()
	if len(tiers) == 0 {
		return fmt.Errorf("bench: chart: nothing measured")
	}
	// Domains, in log10.
	lx0, lx1 := math.Log10(float64(tiers[0])), math.Log10(float64(tiers[len(tiers)-1]))
	pad := math.Max(0.12*(lx1-lx0), 0.3)
	lx0, lx1 = lx0-pad, lx1+pad
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range chartSeries {
		for _, t := range tiers {
			if st := r.find(s.impl, t, conc); st != nil && st.Quantile(0.5) > 0 {
				us := float64(st.Quantile(0.5)) / float64(time.Microsecond)
				lo, hi = math.Min(lo, us), math.Max(hi, us)
			}
		}
	}
	if math.IsInf(lo, 1) {
		return fmt.Errorf("bench: chart: no p50 for concurrency %d", conc)
	}
	ly0, ly1 := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if ly1-ly0 < 1 {
		ly1 = ly0 + 1
	}
	px := func(t float64) float64 { return plotX0 + (math.Log10(t)-lx0)/(lx1-lx0)*(plotX1-plotX0) }
	py := func(us float64) float64 { return plotY1 - (math.Log10(us)-ly0)/(ly1-ly0)*(plotY1-plotY0) }

	var b bytes.Buffer
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }
	text := func(x, y float64, anchor, size, extra, s string) {
		fmt.Fprintf(&b, "<text x=\"%s\" y=\"%s\" text-anchor=\"%s\" font-size=\"%s\" %s %s>%s</text>\n",
			f(x), f(y), anchor, size, chartFont, extra, html.EscapeString(s))
	}
	line := func(x0, y0, x1, y1 float64, color, width, dash string) {
		d := ""
		if dash != "" {
			d = " stroke-dasharray=\"" + dash + "\""
		}
		fmt.Fprintf(&b, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" stroke-width=\"%s\"%s/>\n",
			f(x0), f(y0), f(x1), f(y1), color, width, d)
	}

	fmt.Fprintf(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%s\" height=\"%s\" viewBox=\"0 0 %s %s\">\n", f(chartW), f(chartH), f(chartW), f(chartH))
	fmt.Fprintf(&b, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n")
	text(chartW/2, 28, "middle", "18", "font-weight=\"bold\"", "tierset: p50 latency of one tier lookup vs tier count, backend="+r.Backend)
	text(chartW/2, 50, "middle", "12", "fill=\"#555\"", fmt.Sprintf("%s; %d client(s); %s, GOMAXPROCS=%d; %s",
		r.BackendNote, conc, r.GoVersion, r.GOMAXPROCS, r.Date.Format("2006-01-02 15:04 MST")))

	// Y gridlines: 1, 2, 5 per decade, labels on every one of them.
	for d := ly0; d <= ly1; d++ {
		for _, m := range []float64{1, 2, 5} {
			us := m * math.Pow(10, d)
			if math.Log10(us) > ly1+1e-9 {
				break
			}
			y := py(us)
			color := minorGrid
			if m == 1 {
				color = majorGrid
			}
			line(plotX0, y, plotX1, y, color, "1", "")
			size := "11"
			if m != 1 {
				size = "10"
			}
			text(plotX0-8, y+4, "end", size, "fill=\"#333\"", fmtMicros(us))
		}
	}
	// X gridlines: decades (light), measured tier counts (labelled).
	for d := math.Ceil(lx0); d <= lx1; d++ {
		x := px(math.Pow(10, d))
		line(x, plotY0, x, plotY1, minorGrid, "1", "")
	}
	for _, t := range tiers {
		x := px(float64(t))
		line(x, plotY0, x, plotY1, majorGrid, "1", "")
		line(x, plotY1, x, plotY1+5, axis, "1", "")
		text(x, plotY1+20, "middle", "12", "fill=\"#333\"", strconv.Itoa(t))
	}
	// Axes.
	fmt.Fprintf(&b, "<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1\"/>\n",
		f(plotX0), f(plotY0), f(plotX1-plotX0), f(plotY1-plotY0), axis)
	text((plotX0+plotX1)/2, plotY1+42, "middle", "13", "", "tiers in the promotion (log scale)")
	text(22, (plotY0+plotY1)/2, "middle", "13", fmt.Sprintf("transform=\"rotate(-90 22 %s)\"", f((plotY0+plotY1)/2)), "p50 latency per lookup (log scale)")

	// Series.
	for _, s := range chartSeries {
		var pts [][2]float64
		var labels []string
		for _, t := range tiers {
			if st := r.find(s.impl, t, conc); st != nil && st.Quantile(0.5) > 0 {
				us := float64(st.Quantile(0.5)) / float64(time.Microsecond)
				pts = append(pts, [2]float64{px(float64(t)), py(us)})
				labels = append(labels, fmtMicros(us))
			}
		}
		if len(pts) == 0 {
			continue
		}
		var path bytes.Buffer
		for i, p := range pts {
			cmd := "L"
			if i == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&path, "%s%s %s ", cmd, f(p[0]), f(p[1]))
		}
		dash := ""
		if s.dash != "" {
			dash = " stroke-dasharray=\"" + s.dash + "\""
		}
		fmt.Fprintf(&b, "<path d=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2.5\"%s/>\n", path.String(), s.color, dash)
		for i, p := range pts {
			marker(&b, s.marker, p[0], p[1], s.color)
			// range and raw sit close together, and fullscan near them at few
			// tiers: range labels go above right, raw's below right,
			// fullscan's above left.
			x, dy, anchor := p[0]+8, -10.0, "start"
			switch s.impl {
			case implRaw:
				dy = 20
			case implFullScan:
				x, dy, anchor = p[0]-8, -8, "end"
			case implNear:
				dy = 20
			}
			text(x, p[1]+dy, anchor, "10", "fill=\""+s.color+"\"", labels[i])
		}
	}

	// Legend, under the plot.
	for i, s := range chartSeries {
		y := legendY0 + float64(i)*22
		dash := s.dash
		line(plotX0+10, y, plotX0+50, y, s.color, "2.5", dash)
		marker(&b, s.marker, plotX0+30, y, s.color)
		text(plotX0+60, y+4, "start", "12", "", s.label)
	}
	text(plotX1, chartH-12, "end", "10", "fill=\"#777\"", "go run ./bench -chart FILE.svg; values are medians of every op of the run")
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

func marker(b *bytes.Buffer, kind string, x, y float64, color string) {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	switch kind {
	case "square":
		fmt.Fprintf(b, "<rect x=\"%s\" y=\"%s\" width=\"9\" height=\"9\" fill=\"%s\"/>\n", f(x-4.5), f(y-4.5), color)
	case "diamond":
		fmt.Fprintf(b, "<path d=\"M%s %s L%s %s L%s %s L%s %s Z\" fill=\"%s\"/>\n", f(x), f(y-6), f(x-6), f(y), f(x), f(y+6), f(x+6), f(y), color)
	case "triangle":
		fmt.Fprintf(b, "<path d=\"M%s %s L%s %s L%s %s Z\" fill=\"%s\"/>\n", f(x), f(y-6), f(x-5.5), f(y+4), f(x+5.5), f(y+4), color)
	default:
		fmt.Fprintf(b, "<circle cx=\"%s\" cy=\"%s\" r=\"4.5\" fill=\"%s\"/>\n", f(x), f(y), color)
	}
}

// fmtMicros labels a latency given in microseconds.
func fmtMicros(us float64) string {
	switch {
	case us >= 1e6:
		return strconv.FormatFloat(us/1e6, 'g', 3, 64) + " s"
	case us >= 1e3:
		return strconv.FormatFloat(us/1e3, 'g', 3, 64) + " ms"
	default:
		return strconv.FormatFloat(us, 'g', 3, 64) + " µs"
	}
}
