package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/testredis"
)

// TestConsoleActionLog: a task action, a pause and a dead letter's
// requeue are each one entry naming who (the token, or the login), what,
// how many and when; a refused POST logs nothing; the log keeps logCap
// entries at most.
func TestConsoleActionLog(t *testing.T) {
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
		f := seedConsole(t, b, true)
		ctx := t.Context()
		c := browser(t)
		e, err := f.q.Enqueue(ctx, delay.Job{Key: "log-1", When: delay.After(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		csrf := csrfOf(t, c, f.url+"/confirm?queue=orders&action=cancel&id="+e.ID)
		act := url.Values{"queue": {"orders"}, "action": {"cancel"}, "id": {e.ID, "no-such-task"}, "confirm": {"yes"}, "csrf": {csrf}}
		if code, _ := post(t, c, f.url+"/act", act); code != http.StatusForbidden {
			t.Fatalf("without the token: %d, want 403", code)
		}
		if rows, err := f.srv.readLog(ctx, "", 10); err != nil || len(rows) != 0 {
			t.Fatalf("a refused POST logged %+v, %v", rows, err)
		}
		act.Set("token", webToken)
		if code, _ := post(t, c, f.url+"/act", act); code != http.StatusSeeOther {
			t.Fatalf("cancel: %d", code)
		}
		pause := url.Values{"queue": {"orders"}, "action": {"pause"}, "confirm": {"yes"}, "csrf": {csrf}, "token": {webToken}}
		if code, _ := post(t, c, f.url+"/act", pause); code != http.StatusSeeOther {
			t.Fatalf("pause: %d", code)
		}
		requeue := url.Values{"queue": {"orders"}, "id": {f.deadID[0]}, "csrf": {csrf}, "token": {webToken}}
		if code, _ := post(t, c, f.url+"/dead/requeue", requeue); code != http.StatusSeeOther {
			t.Fatalf("requeue: %d", code)
		}
		rows, err := f.srv.readLog(ctx, "orders", 10)
		if err != nil {
			t.Fatal(err)
		}
		type got struct {
			action               string
			tasks, done, skipped int
		}
		var have []got
		for _, r := range rows {
			have = append(have, got{r.Action, r.Tasks, r.Done, r.Skipped})
			if !strings.HasPrefix(r.Who, "token from ") || time.Since(r.When) > time.Minute || r.Result == "" {
				t.Errorf("entry %+v: want who, a time of now and the result", r)
			}
		}
		want := []got{{"requeue", 1, 1, 0}, {"pause", 0, 0, 0}, {"cancel", 2, 1, 1}}
		if fmt.Sprint(have) != fmt.Sprint(want) {
			t.Errorf("log %v, want %v (newest first)", have, want)
		}
		code, body := get(t, c, f.url+"/log")
		if code != http.StatusOK || strings.Count(body, `<td class="action">`) != 3 || !strings.Contains(body, " UTC</td>") {
			t.Errorf("log page: %d, %d entries, zone shown %v", code, strings.Count(body, `<td class="action">`), strings.Contains(body, " UTC</td>"))
		}
		for i := range logCap + 5 {
			f.srv.record(ctx, logEntry{Who: "test", Action: "cancel", Queue: "other", Result: strconv.Itoa(i)})
		}
		if n, err := b.Client.LLen(ctx, f.srv.logKey()).Result(); err != nil || n != logCap {
			t.Errorf("log length %d, %v; want the cap %d", n, err, logCap)
		}
	})
}
