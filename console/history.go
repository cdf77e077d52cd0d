package console

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/text"
)

// historyWindow is how far back the queue page's charts go: all the
// history a queue keeps.
const historyWindow = 24 * time.Hour

// historyView is the queue page's history section: three line charts of
// one point per minute (delay.Queue.History).
type historyView struct {
	Points         int
	From, To       string // the first and last minute, with the zone
	OK, Failures   int64  // totals over the window
	Charts         []lineChart
	LateBoundLabel string // the p99 line's meaning
}

// lineChart is an inline SVG of one or more series over the same minutes.
// x is the minute's index, so the viewBox is Points-1 wide; the SVG is
// stretched to its box (preserveAspectRatio none) and the strokes keep
// their width (vector-effect), so it fits any screen width.
type lineChart struct {
	ID, Title string
	Width     int // viewBox width: points - 1 (at least 1)
	Height    int
	Max       string // the top of the y axis, with its unit
	Lines     []chartLine
	Ticks     []chartTick // the time axis: one per whole hour
	Cols      []chartCol  // hover targets, each with its values
}

// chartTick is a whole hour on the time axis: a line at X (viewBox
// units) and, every few hours, a label at Left percent of the width (in
// an SVG of its own under the chart, which is stretched and would
// stretch text; a percentage, as inline styles are refused by the
// console's Content-Security-Policy).
type chartTick struct {
	X           int
	Left, Label string
	Show        bool
	Start, End  bool // near the left or right edge: the label starts or ends at its tick
}

// chartCol is a hover target over one to a few minutes: its <title> is
// the span and each line's value (the peak, for a span of several).
type chartCol struct {
	X, W float64
	Tip  string
}

type chartLine struct {
	Class, Label string
	Points       string // "x,y x,y ..." for a polyline
}

// series is one line's values, one per minute.
type series struct {
	class, label string
	vals         []float64
}

const (
	chartHeight = 100
	// maxCols bounds a chart's hover targets: 24 hours of minutes are
	// hovered ten minutes at a time, not 1440 elements per chart.
	maxCols = 144
	// maxLabels bounds the labelled hours of a time axis.
	maxLabels = 8
)

// queueHistory reads the queue's last 24 hours and draws them, times in
// loc.
func queueHistory(ctx context.Context, q *delay.Queue, loc *time.Location) (historyView, error) {
	h, err := q.History(ctx, q.ServerNow().Add(-historyWindow))
	if err != nil {
		return historyView{}, err
	}
	return historyOf(h, loc), nil
}

func historyOf(h []delay.Minute, loc *time.Location) historyView {
	v := historyView{Points: len(h), LateBoundLabel: "p99 (bucket bound)"}
	if len(h) == 0 {
		return v
	}
	v.From, v.To = h[0].Start.In(loc).Format("Jan 2 15:04"), h[len(h)-1].Start.In(loc).Format("Jan 2 15:04 MST")
	ok := make([]float64, len(h))
	retried := make([]float64, len(h))
	dead := make([]float64, len(h))
	mean := make([]float64, len(h))
	p99 := make([]float64, len(h))
	for i, m := range h {
		v.OK += m.OK
		v.Failures += m.Retried + m.Dead
		ok[i], retried[i], dead[i] = float64(m.OK), float64(m.Retried), float64(m.Dead)
		mean[i] = float64(m.LateMean) / float64(time.Millisecond)
		p99[i] = float64(m.LateP99) / float64(time.Millisecond)
	}
	count := func(f float64) string { return strconv.FormatFloat(f, 'f', 0, 64) + " /min" }
	ms := func(f float64) string { return text.Duration(time.Duration(f * float64(time.Millisecond))) }
	starts := make([]time.Time, len(h))
	for i, m := range h {
		starts[i] = m.Start.In(loc)
	}
	v.Charts = []lineChart{
		chart("hist-throughput", "Throughput: tasks handled ok per minute", count,
			series{"ok", "ok", ok}),
		chart("hist-failures", "Failures per minute", count,
			series{"retried", "retried", retried}, series{"dead", "dead-lettered", dead}),
		chart("hist-lateness", "Lateness (due to taken) per minute", ms,
			series{"mean", "mean", mean}, series{"p99", v.LateBoundLabel, p99}),
	}
	for i := range v.Charts {
		v.Charts[i].Ticks = timeTicks(starts)
	}
	v.Charts[0].Cols = hoverCols(starts, count, series{"ok", "ok", ok})
	v.Charts[1].Cols = hoverCols(starts, count, series{"retried", "retried", retried}, series{"dead", "dead-lettered", dead})
	v.Charts[2].Cols = hoverCols(starts, ms, series{"mean", "mean", mean}, series{"p99", v.LateBoundLabel, p99})
	return v
}

// timeTicks marks each whole hour of the minutes starts (already in the
// pages' zone), labelling every 1, 2, 3, 4, 6 or 12 hours so that at
// most maxLabels show.
func timeTicks(starts []time.Time) []chartTick {
	n := len(starts)
	if n < 2 {
		return nil
	}
	hours := int(starts[n-1].Sub(starts[0]).Hours()) + 1
	step := 12
	for _, st := range []int{1, 2, 3, 4, 6} {
		if hours/st < maxLabels {
			step = st
			break
		}
	}
	var ticks []chartTick
	for i, t := range starts {
		if t.Minute() != 0 {
			continue
		}
		label := t.Format("15:04")
		if t.Hour() == 0 {
			label = t.Format("Jan 2")
		}
		left := 100 * float64(i) / float64(n-1)
		ticks = append(ticks, chartTick{X: i, Left: strconv.FormatFloat(left, 'f', 2, 64),
			Label: label, Show: t.Hour()%step == 0, Start: left < 5, End: left > 95})
	}
	return ticks
}

// hoverCols splits the minutes into at most maxCols spans, each a hover
// target whose title is its time span and each line's value there (the
// peak minute's, when a span holds several).
func hoverCols(starts []time.Time, label func(float64) string, lines ...series) []chartCol {
	n := len(starts)
	if n == 0 {
		return nil
	}
	k := (n + maxCols - 1) / maxCols
	cols := make([]chartCol, 0, (n+k-1)/k)
	for i := 0; i < n; i += k {
		j := min(i+k, n) - 1
		var b strings.Builder
		b.WriteString(starts[i].Format("Jan 2 15:04"))
		if j > i {
			// A span across a DST change names both zones: "02:55
			// CEST–02:04 CET", not a span that reads backwards.
			if starts[i].Format("MST") != starts[j].Format("MST") {
				b.WriteString(starts[i].Format(" MST"))
			}
			b.WriteString("–" + starts[j].Format("15:04"))
		}
		b.WriteString(starts[j].Format(" MST"))
		for _, l := range lines {
			peak := slices.Max(l.vals[i : j+1])
			b.WriteString(" · " + l.label + ": ")
			if j > i {
				b.WriteString("peak ")
			}
			b.WriteString(label(peak))
		}
		// A column is centred on its minutes, the first and last cut at
		// the plot's edges (0 and n-1).
		x0, x1 := max(float64(i)-0.5, 0), min(float64(j)+0.5, float64(max(n-1, 1)))
		cols = append(cols, chartCol{X: x0, W: x1 - x0, Tip: b.String()})
	}
	return cols
}

// chart lays out lines of the same length on one y scale from 0 to
// their maximum.
func chart(id, title string, label func(float64) string, lines ...series) lineChart {
	c := lineChart{ID: id, Title: title, Height: chartHeight}
	var top float64
	var n int
	for _, l := range lines {
		n = len(l.vals)
		for _, x := range l.vals {
			top = max(top, x)
		}
	}
	c.Width = max(n-1, 1)
	c.Max = label(top)
	scale := 0.0
	if top > 0 {
		scale = float64(chartHeight-2) / top // 1 px of room for the stroke
	}
	for _, s := range lines {
		var b strings.Builder
		for x, y := range s.vals {
			if x > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(strconv.Itoa(x))
			b.WriteByte(',')
			b.WriteString(strconv.FormatFloat(float64(chartHeight-1)-y*scale, 'f', 1, 64))
		}
		c.Lines = append(c.Lines, chartLine{Class: s.class, Label: s.label, Points: b.String()})
	}
	return c
}
