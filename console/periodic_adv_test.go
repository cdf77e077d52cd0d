package console

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/periodic"
)

// The /periodic/act POST acts only with this browser's CSRF token: a GET
// of it, a forged token, or a token from another browser's session is
// refused and changes nothing.
func TestConsolePeriodicActForged(t *testing.T) {
	eachConsole(t, true, func(t *testing.T, f *consoleFixture) {
		ctx := t.Context()
		declareJob(t, f.q, "proc-1")
		paused := func() bool {
			t.Helper()
			jobs, err := periodic.List(ctx, f.q)
			if err != nil || len(jobs) != 1 {
				t.Fatalf("List: %+v %v", jobs, err)
			}
			return jobs[0].Paused
		}
		victim, attacker := browser(t), browser(t)
		confirm := f.url + "/periodic/confirm?queue=orders&job=report&action=pause"
		mine := csrfOf(t, victim, confirm)
		theirs := csrfOf(t, attacker, confirm)
		form := func(csrf string) url.Values {
			return url.Values{"queue": {"orders"}, "job": {"report"}, "action": {"pause"}, "csrf": {csrf}, "token": {webToken}, "confirm": {"yes"}}
		}
		if code, _ := get(t, victim, f.url+"/periodic/act?"+form(mine).Encode()); code < 400 {
			t.Errorf("GET /periodic/act: %d, want refused", code)
		}
		for name, csrf := range map[string]string{
			"forged token":            strings.Repeat("0", len(mine)),
			"another browser's token": theirs,
		} {
			if code, _ := post(t, victim, f.url+"/periodic/act", form(csrf)); code != http.StatusForbidden && code != http.StatusBadRequest {
				t.Errorf("%s: %d, want 400 or 403", name, code)
			}
		}
		if paused() {
			t.Fatal("a refused request paused the job")
		}
		if code, _ := post(t, victim, f.url+"/periodic/act", form(mine)); code != http.StatusSeeOther {
			t.Fatalf("the victim's own confirmed POST: %d, want 303", code)
		}
		if !paused() {
			t.Fatal("the confirmed POST did not pause")
		}
	})
}

// The Periodic page shows "the periodic jobs of every queue": with
// discovered queues (no fixed list), a queue whose only content is a
// periodic job, its first tick an hour away, is among them.
func TestConsolePeriodicQueueWithoutTasks(t *testing.T) {
	eachConsole(t, true, func(t *testing.T, f *consoleFixture) {
		cron, err := delay.New(f.b.Client, "cron", delay.Options{Prefix: f.b.Prefix})
		if err != nil {
			t.Fatal(err)
		}
		declareJob(t, cron, "proc-1")
		if err := f.srv.loadQueues(t.Context(), true); err != nil {
			t.Fatal(err)
		}
		code, body := get(t, browser(t), f.url+"/periodic")
		if code != http.StatusOK || !strings.Contains(body, `data-queue="cron" data-job="report"`) {
			t.Fatalf("/periodic: %d, lacks the job of queue cron", code)
		}
	})
}
