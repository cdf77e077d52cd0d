package console

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/periodic"
)

// declareJob runs a scheduler declaring the job "report" on q as
// process proc until the test ends, after List shows the declaration.
func declareJob(t *testing.T, q *delay.Queue, proc string) {
	t.Helper()
	s, err := periodic.New(q, periodic.Options{Process: proc, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add(periodic.Job{Name: "report", Schedule: periodic.Every(time.Hour), CatchUp: periodic.CatchUpAll}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		jobs, err := periodic.List(t.Context(), q)
		if err == nil && len(jobs) == 1 && len(jobs[0].Definitions) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scheduler did not declare within 10 s: %+v %v", jobs, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestConsolePeriodic: the Periodic page lists each job with its
// schedule, catch-up, state and processes (escaped); pause and resume go
// through a confirm page that changes nothing, then a POST that needs
// confirm, the CSRF token and the console's token, and act in Redis.
// Unknown jobs, queues and actions are 404 and 400.
func TestConsolePeriodic(t *testing.T) {
	eachConsole(t, true, func(t *testing.T, f *consoleFixture) {
		ctx := t.Context()
		declareJob(t, f.q, "<b>proc-1</b>")
		paused := func() bool {
			t.Helper()
			jobs, err := periodic.List(ctx, f.q)
			if err != nil || len(jobs) != 1 {
				t.Fatalf("List: %+v %v", jobs, err)
			}
			return jobs[0].Paused
		}
		c := browser(t)
		code, body := get(t, c, f.url+"/periodic")
		if code != http.StatusOK {
			t.Fatalf("/periodic: %d\n%s", code, body)
		}
		for _, want := range []string{`data-queue="orders" data-job="report"`, "every 1h0m0s", "<td>all</td>", ">running<",
			"&lt;b&gt;proc-1&lt;/b&gt; (", `href="/periodic/confirm?queue=orders&job=report&action=pause"`} {
			if !strings.Contains(body, want) {
				t.Errorf("/periodic lacks %q", want)
			}
		}
		if strings.Contains(body, "<b>") {
			t.Error("/periodic holds the process name as markup")
		}
		for _, action := range []string{"pause", "resume"} {
			q := url.Values{"queue": {"orders"}, "job": {"report"}, "action": {action}}
			code, body := get(t, c, f.url+"/periodic/confirm?"+q.Encode())
			m := csrfRe.FindStringSubmatch(body)
			if code != http.StatusOK || m == nil || !strings.Contains(body, `action="/periodic/act"`) ||
				!strings.Contains(body, `<input type="hidden" name="job" value="report">`) {
				t.Fatalf("%s: confirm page %d\n%s", action, code, body)
			}
			if paused() != (action == "resume") {
				t.Fatalf("%s: done by the confirm page", action)
			}
			form := url.Values{"queue": {"orders"}, "job": {"report"}, "action": {action}, "csrf": {m[1]}, "token": {webToken}, "confirm": {"yes"}}
			refusedWithout(t, c, f.url+"/periodic/act", form, action)
			if paused() != (action == "resume") {
				t.Fatalf("%s: done by a refused POST", action)
			}
			resp := postRaw(t, c, f.url+"/periodic/act", form, nil)
			if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/periodic?msg=") {
				t.Errorf("%s: %d to %q", action, resp.StatusCode, loc)
			}
			if paused() != (action == "pause") {
				t.Fatalf("%s: not done", action)
			}
			_, body = get(t, c, f.url+"/periodic")
			if action == "pause" && (!strings.Contains(body, ">paused since ") || !strings.Contains(body, "action=resume")) {
				t.Errorf("/periodic after pause shows no pause and no Resume")
			}
		}
		for _, tc := range []struct {
			q    url.Values
			want int
		}{
			{url.Values{"queue": {"orders"}, "job": {"nightly"}, "action": {"pause"}}, http.StatusNotFound},
			{url.Values{"queue": {"nope"}, "job": {"report"}, "action": {"pause"}}, http.StatusNotFound},
			{url.Values{"queue": {"orders"}, "job": {"report"}, "action": {"forget"}}, http.StatusBadRequest},
		} {
			if code, _ := get(t, c, f.url+"/periodic/confirm?"+tc.q.Encode()); code != tc.want {
				t.Errorf("confirm %v: %d, want %d", tc.q, code, tc.want)
			}
		}
		// a POST for a job that does not exist, or a name periodic refuses
		csrf := csrfOf(t, c, f.url+"/periodic/confirm?queue=orders&job=report&action=pause")
		for job, want := range map[string]int{"nightly": http.StatusNotFound, "a b": http.StatusBadRequest} {
			form := url.Values{"queue": {"orders"}, "job": {job}, "action": {"pause"}, "csrf": {csrf}, "token": {webToken}, "confirm": {"yes"}}
			if code, _ := post(t, c, f.url+"/periodic/act", form); code != want {
				t.Errorf("pause %q: %d, want %d", job, code, want)
			}
		}
	})
}
