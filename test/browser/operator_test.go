package browser

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delaytest"
)

// TestBrowserOperator drives the operator's pages in headless Chromium:
// the summary, the browse pages with their cursor, a task page, a bulk
// action through its confirm page, pause and resume, the workers page,
// a queue's 24-hour history charts with their time axis and hover
// values, and every page at 390 px wide
// without the page scrolling sideways.
func TestBrowserOperator(t *testing.T) {
	f := seed(t)
	seedHistory(t, f) // before the console starts: it finds the queues then
	ctx := newBrowser(t)
	base := startConsole(t, f)
	dir := shots(t)
	do(t, ctx, "log in", chromedp.Navigate(base+"/login?next="+url.QueryEscape("/queues")),
		chromedp.WaitVisible(css(`#token`)), chromedp.SendKeys(css(`#token`), token), chromedp.Click(css(`#login-submit`)),
		chromedp.WaitVisible(css(`#summary`)))

	t.Run("summary equals Health", func(t *testing.T) {
		health := func() []string {
			h, err := f.q.Health(t.Context(), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return []string{"orders", strconv.FormatInt(h.Stats.Ready, 10), strconv.FormatInt(h.Stats.Pending-h.Stats.Ready, 10),
				strconv.FormatInt(h.Stats.InFlight, 10), strconv.FormatInt(h.Stats.Dead, 10), string(h.Verdict)}
		}
		var cells []string
		want := steady(t, health, func() {
			do(t, ctx, "summary", chromedp.Navigate(base+"/queues"), chromedp.WaitVisible(css(`#summary`)))
			cells = get(t, ctx, "summary row", chromedp.Evaluate[[]string](
				`Array.from(document.querySelectorAll('#summary tr[data-queue="orders"] td')).map(e => e.textContent.trim())`))
		})
		if len(cells) < 11 || !slices.Equal(cells[:5], want[:5]) || cells[10] != want[5] {
			t.Errorf("summary row %v; Health %v", cells, want)
		}
		screenshot(t, ctx, dir, "summary")
	})

	t.Run("browse pages follow the cursor", func(t *testing.T) {
		due := func() []string {
			p, err := f.q.List(t.Context(), delay.ListOptions{State: delay.StateDue, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			return idsOf(p.Tasks, func(e delay.TaskInfo) string { return e.ID })
		}
		var seen []string
		want := steady(t, due, func() {
			seen = nil
			do(t, ctx, "due tasks", chromedp.Navigate(base+"/tasks?queue=orders&state=due"), chromedp.WaitVisible(css(`#page-info`)))
			for range 5 {
				seen = append(seen, get(t, ctx, "rows", chromedp.Evaluate[[]string](
					`Array.from(document.querySelectorAll('#tasks-table tr[data-id]')).map(r => r.dataset.id)`))...)
				more := get(t, ctx, "next link", chromedp.Evaluate[bool](`!!document.querySelector('#next')`))
				if !more {
					break
				}
				do(t, ctx, "next page", chromedp.Click(css(`#next`)), chromedp.WaitVisible(css(`#first`)))
			}
		})
		if !slices.Equal(seen, want) {
			t.Errorf("browsed %v; List %v", seen, want)
		}
		do(t, ctx, "dead tasks", chromedp.Navigate(base+"/tasks?queue=orders&state=dead"), chromedp.WaitVisible(css(`#tasks-table`)))
		screenshot(t, ctx, dir, "tasks-dead")
	})

	t.Run("task page", func(t *testing.T) {
		do(t, ctx, "task", chromedp.Navigate(base+"/task?queue=orders&id="+f.dead[0]), chromedp.WaitVisible(css(`#task`)))
		payload := get(t, ctx, "payload", chromedp.Text(css(`#payload`)))
		errText := get(t, ctx, "error", chromedp.TextContent(css(`[data-field="error"]`)))
		if errText != xssError || payload == "" || payload[0] != '{' {
			t.Errorf("task page: error %q, payload %q", errText, payload)
		}
		// The earlier errors the record keeps, newest first, as text.
		earlier := get(t, ctx, "earlier errors", chromedp.Evaluate[[]string](
			`Array.from(document.querySelectorAll('[data-field="errors"] li')).map(li => li.textContent)`))
		injected := get(t, ctx, "injected", chromedp.Evaluate[int](`document.querySelectorAll('#task img, #task script').length`))
		want := []string{earlierErrors[1].Error(), earlierErrors[0].Error()}
		if !slices.Equal(earlier, want) || injected != 0 {
			t.Errorf("task page: earlier errors %q with %d injected elements; want %q and none", earlier, injected, want)
		}
		screenshot(t, ctx, dir, "task")
	})

	t.Run("bulk requeue through the confirm page", func(t *testing.T) {
		ids := f.dead[1:3]
		do(t, ctx, "pick", chromedp.Navigate(base+"/tasks?queue=orders&state=dead"), chromedp.WaitVisible(css(`#tasks-table`)))
		for _, id := range ids {
			do(t, ctx, "tick "+id, chromedp.Click(css(`input.pick[value="`+id+`"]`)))
		}
		do(t, ctx, "review", chromedp.SetValue(css(`#bulk-action`), "requeue"), chromedp.Click(css(`#bulk-submit`)),
			chromedp.WaitVisible(css(`#confirm-form`)))
		listed := get(t, ctx, "confirm rows", chromedp.Evaluate[[]string](
			`Array.from(document.querySelectorAll('#confirm-table tr[data-id]')).map(r => r.dataset.id)`))
		slices.Sort(listed)
		want := slices.Sorted(slices.Values(ids))
		if !slices.Equal(listed, want) || !delaytest.DeadIDs(t, f.q)[ids[0]] {
			t.Fatalf("confirm page lists %v, want %v, and changes nothing", listed, ids)
		}
		screenshot(t, ctx, dir, "confirm")
		do(t, ctx, "confirm", chromedp.Click(css(`#confirm-submit`)), chromedp.WaitVisible(css(`#msg`)))
		dead := delaytest.DeadIDs(t, f.q)
		if dead[ids[0]] || dead[ids[1]] {
			t.Errorf("after the confirmed requeue %v are still dead", ids)
		}
	})

	t.Run("pause and resume", func(t *testing.T) {
		do(t, ctx, "pause", chromedp.Navigate(base+"/queue?name=orders"), chromedp.WaitVisible(css(`#pause`)),
			chromedp.Click(css(`#pause`)), chromedp.WaitVisible(css(`#confirm-form`)), chromedp.Click(css(`#confirm-submit`)),
			chromedp.WaitVisible(css(`#resume`)))
		if st, err := f.q.Stats(t.Context()); err != nil || !st.Paused {
			t.Fatalf("after pause: %+v, %v", st.Paused, err)
		}
		screenshot(t, ctx, dir, "queue-paused")
		do(t, ctx, "resume", chromedp.Click(css(`#resume`)), chromedp.WaitVisible(css(`#confirm-form`)),
			chromedp.Click(css(`#confirm-submit`)), chromedp.WaitVisible(css(`#pause`)))
		if st, err := f.q.Stats(t.Context()); err != nil || st.Paused {
			t.Fatalf("after resume: %+v, %v", st.Paused, err)
		}
	})

	t.Run("workers page", func(t *testing.T) {
		do(t, ctx, "workers", chromedp.Navigate(base+"/workers"), chromedp.WaitVisible(css(`#no-workers`)))
	})

	t.Run("queue history", func(t *testing.T) {
		do(t, ctx, "history", chromedp.Navigate(base+"/queue?name="+historyQueue), chromedp.WaitVisible(css(`#history`)))
		lines := get(t, ctx, "chart lines", chromedp.Evaluate[[]int](
			`Array.from(document.querySelectorAll('#history svg.line polyline')).map(p => p.points.numberOfItems)`))
		if !slices.Equal(lines, []int{1440, 1440, 1440, 1440, 1440}) {
			t.Errorf("chart lines have %v points, want five of 1440", lines)
		}
		// drawn, not just present: each chart has a box of its own
		heights := get(t, ctx, "chart heights", chromedp.Evaluate[[]int](
			`Array.from(document.querySelectorAll('#history svg.line')).map(s => Math.round(s.getBoundingClientRect().height))`))
		if !slices.Equal(heights, []int{100, 100, 100}) {
			t.Errorf("chart heights %v px, want three of 100", heights)
		}
		totals := get(t, ctx, "totals", chromedp.Text(css(`#history p`)))
		want := fmt.Sprintf("%d handled ok, %d failures", historyTasks-historyDead, historyDead)
		if !strings.Contains(totals, want) {
			t.Errorf("history totals %q, want %q", totals, want)
		}
		// The time axis and the hover values: each chart has a tick per
		// whole hour of its 24 (labels every 4 h), and 144 hover targets
		// of 10 minutes whose titles give the span in UTC and the peak; the
		// highest peak of the throughput chart is its caption's max.
		axis := get(t, ctx, "axes", chromedp.Evaluate[[]int](
			`Array.from(document.querySelectorAll('#history figure')).flatMap(f => [f.querySelectorAll('line.tick').length, f.querySelectorAll('svg.axis text').length, f.querySelectorAll('rect.col > title').length])`))
		if !slices.Equal(axis, []int{24, 6, 144, 24, 6, 144, 24, 6, 144}) {
			t.Errorf("ticks, labels and hover targets per chart %v, want 24, 6 and 144 each", axis)
		}
		tips := get(t, ctx, "hover titles", chromedp.Evaluate[[]string](
			`Array.from(document.querySelectorAll('#hist-throughput rect.col > title')).map(e => e.textContent)`))
		top := get(t, ctx, "max", chromedp.Text(css(`#hist-throughput .top`)))
		peak := 0
		for _, tip := range tips {
			m := tipRe.FindStringSubmatch(tip)
			if m == nil {
				t.Fatalf("hover title %q, want \"Dec 7 05:10–05:19 UTC · ok: peak N /min\"", tip)
			}
			n, _ := strconv.Atoi(m[1])
			peak = max(peak, n)
		}
		if want := fmt.Sprintf("max %d /min", peak); top != want {
			t.Errorf("throughput chart: caption %q, highest hover peak %d", top, peak)
		}
		screenshot(t, ctx, dir, "queue-history")
	})

	t.Run("390 px wide", func(t *testing.T) {
		do(t, ctx, "narrow", chromedp.EmulateViewport(390, 900))
		for _, page := range []string{"/queues", "/queue?name=orders", "/tasks?queue=orders&state=dead", "/task?queue=orders&id=" + f.dead[0],
			"/workers", "/dead?queue=orders", "/log", "/promotions", "/promotion?id=spend-more&value=250", "/queue?name=" + historyQueue} {
			do(t, ctx, "load "+page, chromedp.Navigate(base+page), chromedp.WaitVisible(css(`main`)))
			w := get(t, ctx, "page width", chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
			if w > 390 {
				t.Errorf("%s at 390 px: the page is %d px wide", page, w)
			}
		}
		do(t, ctx, "narrow queues", chromedp.Navigate(base+"/queues"), chromedp.WaitVisible(css(`#summary`)))
		screenshot(t, ctx, dir, "narrow-queues")
		do(t, ctx, "narrow history", chromedp.Navigate(base+"/queue?name="+historyQueue), chromedp.WaitVisible(css(`#history`)))
		screenshot(t, ctx, dir, "narrow-queue-history")
	})
}

// tipRe reads a 10-minute hover title of the throughput chart.
var tipRe = regexp.MustCompile(`^[A-Z][a-z]{2} \d{1,2} \d\d:\d\d–\d\d:\d\d UTC · ok: peak (\d+) /min$`)

// The history queue: historyTasks tasks handled by a worker before the
// console starts, historyDead of them dead-lettered.
const (
	historyQueue              = "reports"
	historyTasks, historyDead = 60, 6
)

// seedHistory runs a worker over the history queue's tasks until every
// one is handled, so the queue's history holds them.
func seedHistory(t *testing.T, f *fixture) {
	t.Helper()
	ctx := t.Context()
	q, err := delay.New(f.b.Client, historyQueue, delay.Options{Prefix: f.b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, historyTasks)
	for i := range keys {
		keys[i] = fmt.Sprintf("report-%02d", i)
	}
	delaytest.HandleAll(t, ctx, q, keys, historyDead, "report template missing", 30*time.Second)
}
