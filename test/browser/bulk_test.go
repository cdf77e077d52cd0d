package browser

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delayraw"
	"github.com/tierset/tierset/internal/testredis"
)

// bulkQueue holds the backlog of TestBrowserFilterWide: bulkDead dead
// letters, every other one of key prefix acme- and error "payment …",
// the others other- and "stock …".
const (
	bulkQueue = "backlog"
	bulkDead  = 3000
)

// seedBacklog dead-letters bulkDead tasks of a fresh queue under a fresh
// prefix and returns the queue.
func seedBacklog(t *testing.T) (*testredis.Backend, *delay.Queue) {
	t.Helper()
	b := testredis.Redis(t)
	ctx := t.Context()
	q, err := delay.New(b.Client, bulkQueue, delay.Options{Prefix: b.Prefix, Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	jobs := make([]delay.Job, 0, delay.MaxBatch)
	for i := range bulkDead {
		key := fmt.Sprintf("other-%05d", i)
		if i%2 == 0 {
			key = fmt.Sprintf("acme-%05d", i)
		}
		jobs = append(jobs, delay.Job{Key: key, Payload: []byte(`{"n":` + strconv.Itoa(i) + `}`)})
		if len(jobs) == cap(jobs) || i == bulkDead-1 {
			if _, err := q.EnqueueBatch(ctx, jobs); err != nil {
				t.Fatal(err)
			}
			jobs = jobs[:0]
		}
	}
	for left := bulkDead; left > 0; {
		batch, err := delayraw.Take(ctx, q, min(left, delay.MaxBatch))
		if err != nil || len(batch) == 0 {
			t.Fatalf("take: %d, %v", len(batch), err)
		}
		left -= len(batch)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < len(batch); i += 8 {
					tk := batch[i]
					cause := errors.New("stock service timed out")
					if strings.HasPrefix(tk.Key, "acme-") {
						cause = errors.New("payment service said 503")
					}
					if _, err := delayraw.Kill(ctx, q, tk, cause); err != nil {
						mu.Lock()
						firstErr = cmpOr(firstErr, err)
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		if firstErr != nil {
			t.Fatal(firstErr)
		}
	}
	return b, q
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// TestBrowserFilterWide walks a filter-wide action in Chromium at
// 1280 px and at 390 px: filter the dead letters, ask for "every task
// matching", read the count on the confirm page, confirm, follow the job
// page to its end, and find the action in the log; each page at 390 px
// without sideways scrolling. Screenshots of each step go to shots().
func TestBrowserFilterWide(t *testing.T) {
	b, q := seedBacklog(t)
	ctx := newBrowser(t)
	base := startConsoleOn(t, testredis.URL(), b.Prefix)
	dir := shots(t)
	do(t, ctx, "log in", chromedp.Navigate(base+"/login?next=%2Fqueues"),
		chromedp.WaitVisible(css(`#token`)), chromedp.SendKeys(css(`#token`), token), chromedp.Click(css(`#login-submit`)),
		chromedp.WaitVisible(css(`#summary`)))
	deadNow := func() int64 {
		st, err := q.Stats(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return st.Dead
	}
	half := int64(bulkDead / 2)
	for _, tc := range []struct {
		width         int
		field, text   string
		param         string // the filter's query parameter
		action        string
		wantDeadAfter int64
		filterWord    string
	}{
		{1280, "#filter-key", "acme-", "key", "requeue", bulkDead - half, `key starting "acme-"`},
		{390, "#filter-err", "stock service", "err", "delete", 0, `error containing "stock service"`},
	} {
		name := fmt.Sprintf("%s at %d px", tc.action, tc.width)
		t.Run(name, func(t *testing.T) {
			before := deadNow()
			do(t, ctx, "viewport", chromedp.EmulateViewport(int64(tc.width), 900))
			narrow := func(page string) {
				t.Helper()
				if w := get(t, ctx, "page width", chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > tc.width {
					t.Errorf("%s at %d px: the page is %d px wide", page, tc.width, w)
				}
			}
			shot := func(step string) { screenshot(t, ctx, dir, fmt.Sprintf("filter-wide-%d-%s", tc.width, step)) }
			do(t, ctx, "dead tasks", chromedp.Navigate(base+"/tasks?queue="+bulkQueue+"&state=dead"), chromedp.WaitVisible(css(`#filters`)),
				chromedp.SendKeys(css(tc.field), tc.text), chromedp.Click(css(`#filter-submit`)),
				// the filtered page's form carries the filter (the unfiltered one has the form too)
				chromedp.WaitReady(css(`#bulk-filter input[name="`+tc.param+`"][value="`+tc.text+`"]`)), chromedp.WaitVisible(css(`#bulk-filter`)))
			narrow("filtered tasks")
			shot("1-filtered")
			do(t, ctx, "review", chromedp.SetValue(css(`#bulk-filter-action`), tc.action), chromedp.Click(css(`#bulk-filter-submit`)),
				chromedp.WaitVisible(css(`#confirm-count`)))
			count := get(t, ctx, "count", chromedp.Text(css(`#confirm-count`)))
			what := get(t, ctx, "what", chromedp.Text(css(`#bulk-what`)))
			button := get(t, ctx, "button", chromedp.Text(css(`#confirm-submit`)))
			if count != strconv.FormatInt(half, 10) || !strings.Contains(what, tc.filterWord) ||
				button != fmt.Sprintf("Yes, %s %d tasks", tc.action, half) {
				t.Errorf("confirm page: count %q, %q, button %q; want %d of %s", count, what, button, half, tc.filterWord)
			}
			if got := deadNow(); got != before {
				t.Fatalf("dead %d after the confirm page, was %d: it changed something", got, before)
			}
			narrow("confirm")
			shot("2-confirm")
			do(t, ctx, "confirm", chromedp.Click(css(`#confirm-submit`)), chromedp.WaitVisible(css(`#job[data-status="done"]`)))
			counts := get(t, ctx, "job counts", chromedp.Evaluate[[]string](
				`["job-expected", "job-done", "job-skipped"].map(id => document.getElementById(id).textContent.trim())`))
			progress := get(t, ctx, "progress", chromedp.Evaluate[int](`document.getElementById("job-progress").value`))
			if strings.Join(counts, " ") != fmt.Sprintf("%d %d 0", half, half) || progress != 100 {
				t.Errorf("job page: counted, done, skipped %v, progress %d; want %d %d 0 and 100", counts, progress, half, half)
			}
			if got := deadNow(); got != tc.wantDeadAfter {
				t.Errorf("dead %d after the job, want %d", got, tc.wantDeadAfter)
			}
			narrow("job")
			shot("3-job")
			do(t, ctx, "log", chromedp.Click(css(`#job-log`)), chromedp.WaitVisible(css(`#log`)))
			first := get(t, ctx, "log row", chromedp.Evaluate[[]string](
				`Array.from(document.querySelectorAll('#log tr')[1].children).map(td => td.textContent.trim())`))
			if len(first) < 7 || !strings.HasSuffix(first[0], " UTC") || !strings.HasPrefix(first[1], "login ") || first[2] != tc.action ||
				!strings.Contains(first[4], tc.filterWord) || first[5] != strconv.FormatInt(half, 10) || first[6] != "0" {
				t.Errorf("log's newest row %q", first)
			}
			narrow("log")
			shot("4-log")
		})
	}
}
