package browser

import (
	"context"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/periodic"
)

// TestBrowserPeriodic drives the Periodic page in headless Chromium: the
// row of a job equals periodic.List (schedule, catch-up, state, the
// declaring process), and Pause… then Resume… go through the confirm
// page and change the job in Redis.
func TestBrowserPeriodic(t *testing.T) {
	b := testredis.Redis(t)
	ctx := t.Context()
	q, err := delay.New(b.Client, "jobs", delay.Options{Prefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	// a task, so that the console discovers the queue when it starts
	if _, err := q.Enqueue(ctx, delay.Job{Key: "other", Payload: []byte("x"), When: delay.After(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	s, err := periodic.New(q, periodic.Options{Process: "web-1", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add(periodic.Job{Name: "nightly-report", Schedule: periodic.Every(time.Hour), CatchUp: periodic.CatchUpSkip}); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	var run sync.WaitGroup
	run.Go(func() { _ = s.Run(rctx) })
	t.Cleanup(func() { cancel(); run.Wait() })
	list := func() periodic.JobInfo {
		t.Helper()
		jobs, err := periodic.List(ctx, q)
		if err != nil || len(jobs) != 1 {
			t.Fatalf("List: %+v %v", jobs, err)
		}
		return jobs[0]
	}
	deadline := time.Now().Add(10 * time.Second)
	for jobs, err := periodic.List(ctx, q); err != nil || len(jobs) == 0 || len(jobs[0].Definitions) == 0; jobs, err = periodic.List(ctx, q) {
		if time.Now().After(deadline) {
			t.Fatal("the scheduler did not declare within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}

	bctx := newBrowser(t)
	base := startConsoleOn(t, testredis.URL(), b.Prefix)
	dir := shots(t)
	do(t, bctx, "log in", chromedp.Navigate(base+"/login?next="+url.QueryEscape("/periodic")),
		chromedp.WaitVisible(css(`#token`)), chromedp.SendKeys(css(`#token`), token), chromedp.Click(css(`#login-submit`)),
		chromedp.WaitVisible(css(`#periodic`)))
	row := `#periodic tr[data-queue="jobs"][data-job="nightly-report"]`
	cells := func() []string {
		t.Helper()
		return get(t, bctx, "row", chromedp.Evaluate[[]string](
			`Array.from(document.querySelectorAll('`+row+` td')).map(e => e.textContent.trim())`))
	}
	ji := list()
	got := cells()
	if len(got) < 9 || !slices.Equal(got[:5], []string{"jobs", "nightly-report", ji.Spec, ji.CatchUp.String(), "running"}) ||
		!declaredRe.MatchString(got[8]) {
		t.Fatalf("row %q; List %+v", got, ji)
	}

	for _, step := range []struct{ link, state string }{{"a.pause", "paused"}, {"a.resume", "running"}} {
		do(t, bctx, step.link, chromedp.Navigate(base+"/periodic"), chromedp.WaitVisible(css(row)),
			chromedp.Click(css(row+" "+step.link)), chromedp.WaitVisible(css(`#confirm-form`)))
		if job := get(t, bctx, "confirm job", chromedp.Text(css(`#confirm-job`))); job != "nightly-report" || list().Paused != (step.state == "running") {
			t.Fatalf("%s: the confirm page names %q, or changed the job", step.link, job)
		}
		do(t, bctx, "confirm", chromedp.Click(css(`#confirm-submit`)), chromedp.WaitVisible(css(`#msg`)), chromedp.WaitVisible(css(row)))
		if list().Paused != (step.state == "paused") {
			t.Fatalf("%s confirmed: Paused %v", step.link, list().Paused)
		}
		state := cells()[4]
		if len(state) < len(step.state) || state[:len(step.state)] != step.state {
			t.Errorf("%s confirmed: the row's state reads %q, want %s", step.link, state, step.state)
		}
		if step.state == "paused" {
			screenshot(t, bctx, dir, "periodic")
		}
	}
}

// declaredRe is the process cell: its name and when it last declared.
var declaredRe = regexp.MustCompile(`^web-1 \(\d+s ago\)$`)
