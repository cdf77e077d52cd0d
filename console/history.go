package console

import (
	"context"
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
	From, To       string // the first and last minute, UTC
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

const chartHeight = 100

// queueHistory reads the queue's last 24 hours and draws them.
func queueHistory(ctx context.Context, q *delay.Queue) (historyView, error) {
	h, err := q.History(ctx, q.ServerNow().Add(-historyWindow))
	if err != nil {
		return historyView{}, err
	}
	return historyOf(h), nil
}

func historyOf(h []delay.Minute) historyView {
	v := historyView{Points: len(h), LateBoundLabel: "p99 (bucket bound)"}
	if len(h) == 0 {
		return v
	}
	v.From, v.To = h[0].Start.UTC().Format("Jan 2 15:04"), h[len(h)-1].Start.UTC().Format("Jan 2 15:04")
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
	v.Charts = []lineChart{
		chart("hist-throughput", "Throughput: tasks handled ok per minute", count,
			series{"ok", "ok", ok}),
		chart("hist-failures", "Failures per minute", count,
			series{"retried", "retried", retried}, series{"dead", "dead-lettered", dead}),
		chart("hist-lateness", "Lateness (due to taken) per minute", ms,
			series{"mean", "mean", mean}, series{"p99", v.LateBoundLabel, p99}),
	}
	return v
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
