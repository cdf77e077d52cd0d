package console

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delaytest"
	"github.com/tierset/tierset/internal/testredis"
)

// The history queue's tasks: histTasks handled, histBad of them dead-lettered.
const histTasks, histBad = 7, 2

var (
	polyRe  = regexp.MustCompile(`<polyline class="([a-z0-9]+)" vector-effect="non-scaling-stroke" points="([^"]*)"`)
	figRe   = regexp.MustCompile(`<figure class="linechart" id="(hist-[a-z]+)"`)
	totalOK = regexp.MustCompile(`(\d+) handled ok, (\d+) failures`)
)

// The queue page draws the queue's last 24 hours, one point a minute, in
// three SVG charts, with the totals a worker counted.
func TestConsoleQueueHistory(t *testing.T) {
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
		ctx := t.Context()
		// The worker runs before the console starts, which finds the
		// queues at start-up.
		f := seedConsoleWith(t, b, true, func(*Options) { runHistoryWorker(t, ctx, b) })
		c := browser(t)
		code, body := get(t, c, f.url+"/queue?name=history")
		if code != 200 {
			t.Fatalf("queue page: %d", code)
		}
		if !strings.Contains(body, `id="history" data-points="1440"`) {
			t.Fatalf("no history section of 1440 points")
		}
		if m := totalOK.FindStringSubmatch(body); m == nil || m[1] != strconv.Itoa(histTasks-histBad) || m[2] != strconv.Itoa(histBad) {
			t.Errorf("totals %v, want %d ok and %d failures", m, histTasks-histBad, histBad)
		}
		var figs []string
		for _, m := range figRe.FindAllStringSubmatch(body, -1) {
			figs = append(figs, m[1])
		}
		if strings.Join(figs, " ") != "hist-throughput hist-failures hist-lateness" {
			t.Errorf("charts %v", figs)
		}
		lines := polyRe.FindAllStringSubmatch(body, -1)
		var classes []string
		for _, l := range lines {
			classes = append(classes, l[1])
			if pts := strings.Fields(l[2]); len(pts) != 1440 {
				t.Errorf("line %s has %d points, want 1440", l[1], len(pts))
			}
		}
		if strings.Join(classes, " ") != "ok retried dead mean p99" {
			t.Errorf("lines %v", classes)
		}
		// the seeded queue: a worker never ran, every point is at zero
		_, body = get(t, c, f.url+"/queue?name=orders")
		if m := totalOK.FindStringSubmatch(body); m == nil || m[1] != "0" || m[2] != "0" {
			t.Errorf("orders totals %v, want none", m)
		}
	})
}

// runHistoryWorker handles histTasks tasks of a queue "history", histBad of them
// dead-lettered, and stops its worker once all are handled.
func runHistoryWorker(t *testing.T, ctx context.Context, b *testredis.Backend) {
	t.Helper()
	q, err := delay.New(b.Client, "history", delay.Options{Prefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	const histTasks, histBad = 7, 2
	keys := make([]string, histTasks)
	for i := range keys {
		keys[i] = "h" + strconv.Itoa(i)
	}
	delaytest.HandleAll(t, ctx, q, keys, histBad, "refused", 10*time.Second)
}

// historyOf draws each series on one scale from 0 to the maximum: the
// top value touches the top, zero the bottom.
func TestConsoleHistoryChartScale(t *testing.T) {
	t.Parallel()
	start := time.Unix(29_000_000*60, 0)
	h := make([]delay.Minute, 3)
	for i := range h {
		h[i].Start = start.Add(time.Duration(i) * time.Minute)
	}
	h[1].OK = 4
	h[2].OK, h[2].Dead = 2, 1
	h[2].Late[1] = 3
	h[2].LateSum = 60 * time.Millisecond
	h[2].LateMean, h[2].LateP99 = 20*time.Millisecond, 100*time.Millisecond // as History computes them
	v := historyOf(h, time.UTC)
	if v.Points != 3 || v.OK != 6 || v.Failures != 1 {
		t.Fatalf("view %+v", v)
	}
	for _, c := range []struct {
		chart, line int
		points, max string
	}{
		{0, 0, "0,99.0 1,1.0 2,50.0", "4 /min"},
		{1, 1, "0,99.0 1,99.0 2,1.0", "1 /min"},
		{2, 0, "0,99.0 1,99.0 2,79.4", "100ms"}, // mean 20 ms of a 100 ms top (the p99 bound): 99 - 20·98/100
		{2, 1, "0,99.0 1,99.0 2,1.0", "100ms"},
	} {
		ch := v.Charts[c.chart]
		if got := ch.Lines[c.line].Points; got != c.points || ch.Max != c.max || ch.Width != 2 {
			t.Errorf("chart %s line %s: %q max %q width %d, want %q max %q", ch.ID, ch.Lines[c.line].Class, got, ch.Max, ch.Width, c.points, c.max)
		}
	}
}

// TestChartTimeAxis: a day of minutes has a tick at each whole hour of
// the pages' zone (a zone half an hour off UTC puts them at UTC's :30),
// labels on at most maxLabels of them, and at most maxCols hover
// targets whose titles name their span, its zone and each line's value.
func TestChartTimeAxis(t *testing.T) {
	t.Parallel()
	ist := time.FixedZone("IST", 5*3600+1800)
	for _, tc := range []struct {
		name                  string
		minutes               int
		loc                   *time.Location
		ticks, labels, cols   int
		firstTick, firstLabel string
		firstTip              string
	}{
		// 05:17 UTC on: the first whole hour is 06:00 (minute 43).
		{"day UTC", 1440, time.UTC, 24, 6, 144, "06:00", "08:00", "Dec 7 05:17–05:26 UTC · ok: peak 9 /min"},
		{"day IST", 1440, ist, 24, 6, 144, "11:00", "12:00", "Dec 7 10:47–10:56 IST · ok: peak 9 /min"},
		{"an hour", 60, time.UTC, 1, 1, 60, "06:00", "06:00", "Dec 7 05:17 UTC · ok: 0 /min"},
		{"one minute", 1, time.UTC, 0, 0, 1, "", "", "Dec 7 05:17 UTC · ok: 0 /min"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Date(2026, 12, 7, 5, 17, 0, 0, time.UTC)
			h := make([]delay.Minute, tc.minutes)
			for i := range h {
				h[i].Start = start.Add(time.Duration(i) * time.Minute)
				h[i].OK = int64(i % 10)
			}
			v := historyOf(h, tc.loc)
			c := v.Charts[0]
			labels := 0
			for _, tk := range c.Ticks {
				if tk.Show {
					labels++
				}
			}
			if len(c.Ticks) != tc.ticks || labels != tc.labels || len(c.Cols) != tc.cols {
				t.Fatalf("%d ticks, %d labels, %d hover targets; want %d, %d, %d", len(c.Ticks), labels, len(c.Cols), tc.ticks, tc.labels, tc.cols)
			}
			if len(c.Ticks) > 0 {
				first := ""
				for _, tk := range c.Ticks {
					if tk.Show {
						first = tk.Label
						break
					}
				}
				if c.Ticks[0].Label != tc.firstTick || first != tc.firstLabel {
					t.Errorf("first tick %q, first label %q; want %q, %q", c.Ticks[0].Label, first, tc.firstTick, tc.firstLabel)
				}
			}
			if c.Cols[0].Tip != tc.firstTip {
				t.Errorf("first hover title %q, want %q", c.Cols[0].Tip, tc.firstTip)
			}
			// The targets tile the plot: from 0 to its width, no gap.
			end := 0.0
			for _, col := range c.Cols {
				if col.X != end {
					t.Fatalf("a target at %v, the last ended at %v", col.X, end)
				}
				end = col.X + col.W
			}
			if want := float64(max(tc.minutes-1, 1)); tc.minutes > 1 && end != want {
				t.Errorf("targets end at %v, want %v", end, want)
			}
		})
	}
}
