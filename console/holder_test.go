package console

import (
	"encoding/json"
	"html"
	"os"
	"regexp"
	"testing"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delaytest"
	"github.com/tierset/tierset/internal/opsview"
)

// TestConsoleInflightHolder: the in-flight tab, the queue card, the task
// page and /api/tasks name the pool whose heartbeat lists a task (ID and
// host), and say "not in a heartbeat yet" of the fixture's task taken by
// hand, which no live entry lists.
func TestConsoleInflightHolder(t *testing.T) {
	t.Parallel()
	host, err := os.Hostname()
	if err != nil {
		t.Skipf("no hostname to expect in the entry: %v", err)
	}
	eachConsole(t, true, func(t *testing.T, f *consoleFixture) {
		ctx := t.Context()
		byHand, err := f.q.List(ctx, delay.ListOptions{State: delay.StateInFlight, Limit: 10})
		if err != nil || len(byHand.Tasks) != 1 {
			t.Fatalf("the fixture's in-flight task: %v %+v", err, byHand)
		}
		unlisted := byHand.Tasks[0].ID
		for _, key := range []string{"held-1", "held-2"} {
			if _, err := f.q.Enqueue(ctx, delay.Job{Key: key}); err != nil {
				t.Fatal(err)
			}
		}
		held, release := delaytest.HoldTasks(t, ctx, f.q, 2, "console-pool")
		c := browser(t)
		named := html.EscapeString("console-pool (" + host + ")")
		cell := func(id string) *regexp.Regexp { // the row of id up to its worker cell
			return regexp.MustCompile(`(?s)<tr data-id="` + id + `">.*?<td class="holder" title="[^"]*">([^<]*)</td>`)
		}
		_, body := get(t, c, f.url+"/tasks?queue=orders&state=inflight")
		if !regexp.MustCompile(`<th>worker</th>`).MatchString(body) {
			t.Fatalf("in-flight tab: no worker column\n%s", body)
		}
		for _, tc := range []struct{ id, want string }{
			{held[0], named}, {held[1], named}, {unlisted, opsview.NotListed},
		} {
			m := cell(tc.id).FindStringSubmatch(body)
			if m == nil || m[1] != tc.want {
				t.Errorf("in-flight tab, task %s: worker cell %q, want %q", tc.id, m, tc.want)
			}
		}
		if _, body := get(t, c, f.url+"/tasks?queue=orders&state=due"); regexp.MustCompile(`<th>worker</th>`).MatchString(body) {
			t.Error("the due tab has a worker column")
		}
		_, body = get(t, c, f.url+"/queue?name=orders")
		if n := regexp.MustCompile(`<td class="holder" title="[^"]*">`+regexp.QuoteMeta(named)+`</td>`).FindAllString(body, -1); len(n) != 2 {
			t.Errorf("queue card: %d in-flight rows name the pool, want 2\n%s", len(n), body)
		}
		if !regexp.MustCompile(`<td class="holder" title="[^"]*">` + opsview.NotListed + `</td>`).MatchString(body) {
			t.Errorf("queue card: no %q row", opsview.NotListed)
		}
		for _, tc := range []struct{ id, want string }{{held[0], named}, {unlisted, opsview.NotListed}} {
			_, body = get(t, c, f.url+"/task?queue=orders&id="+tc.id)
			if !regexp.MustCompile(`data-field="worker" title="[^"]*">` + regexp.QuoteMeta(tc.want)).MatchString(body) {
				t.Errorf("task page %s: want worker %q", tc.id, tc.want)
			}
		}
		_, body = get(t, c, f.url+"/api/tasks?queue=orders&state=inflight")
		var pg opsview.Page
		if err := json.Unmarshal([]byte(body), &pg); err != nil || len(pg.Tasks) != 3 {
			t.Fatalf("/api/tasks: %v\n%s", err, body)
		}
		for _, v := range pg.Tasks {
			want := [2]string{"console-pool", host}
			if v.ID == unlisted {
				want = [2]string{}
			}
			if [2]string{v.Worker, v.WorkerHost} != want {
				t.Errorf("/api/tasks task %s: worker %q on %q, want %q", v.ID, v.Worker, v.WorkerHost, want)
			}
		}
		release()
		_, body = get(t, c, f.url+"/tasks?queue=orders&state=inflight")
		if m := cell(unlisted).FindStringSubmatch(body); m == nil || m[1] != opsview.NotListed || regexp.MustCompile(`console-pool`).MatchString(body) {
			t.Errorf("after the handlers returned: %q\n%s", m, body)
		}
	})
}
