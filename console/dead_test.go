package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delayraw"
	"github.com/tierset/tierset/internal/delaytest"
)

// TestWebRequeueAllNeedsConfirmation: requeue-all shows a confirmation
// page on GET and runs only on a POST that repeats the queue's name and
// carries the CSRF token and the console's token.
func TestWebRequeueAllNeedsConfirmation(t *testing.T) {
	t.Parallel()
	eachConsole(t, true, func(t *testing.T, f *consoleFixture) {
		c := browser(t)
		_, body := get(t, c, f.url+"/dead?queue=orders")
		if !strings.Contains(body, `href="/dead/requeue-all?queue=orders" id="requeue-all"`) {
			t.Errorf("the dead page does not link requeue-all to its confirmation:\n%s", body)
		}
		code, body := get(t, c, f.url+"/dead/requeue-all?queue=orders&confirm=orders&token="+webToken)
		if code != http.StatusOK || !strings.Contains(body, "Requeue all <strong>2</strong> dead letters") || len(delaytest.DeadIDs(t, f.q)) != 2 {
			t.Fatalf("confirmation page: %d, %d dead left\n%s", code, len(delaytest.DeadIDs(t, f.q)), body)
		}
		if code, _ := get(t, c, f.url+"/dead/requeue-all?queue=nope"); code != http.StatusNotFound {
			t.Errorf("confirmation for an unknown queue: status %d, want 404", code)
		}
		csrf := csrfRe.FindStringSubmatch(body)[1]
		for _, tc := range []struct {
			name string
			form url.Values
			want int
		}{
			{"no confirm", url.Values{"queue": {"orders"}, "csrf": {csrf}, "token": {webToken}}, http.StatusBadRequest},
			{"wrong name", url.Values{"queue": {"orders"}, "csrf": {csrf}, "token": {webToken}, "confirm": {"Orders"}}, http.StatusBadRequest},
			{"no token", url.Values{"queue": {"orders"}, "csrf": {csrf}, "confirm": {"orders"}}, http.StatusForbidden},
			{"no csrf", url.Values{"queue": {"orders"}, "token": {webToken}, "confirm": {"orders"}}, http.StatusForbidden},
		} {
			if code, _ := post(t, c, f.url+"/dead/requeue-all", tc.form); code != tc.want || len(delaytest.DeadIDs(t, f.q)) != 2 {
				t.Fatalf("%s: status %d (want %d), %d dead left (want 2)", tc.name, code, tc.want, len(delaytest.DeadIDs(t, f.q)))
			}
		}
		code, _ = post(t, c, f.url+"/dead/requeue-all", url.Values{"queue": {"orders"}, "csrf": {csrf}, "token": {webToken}, "confirm": {"orders"}})
		if code != http.StatusSeeOther || len(delaytest.DeadIDs(t, f.q)) != 0 {
			t.Fatalf("confirmed requeue-all: status %d, %d dead left", code, len(delaytest.DeadIDs(t, f.q)))
		}
		for _, key := range []string{"order-0", "order-1"} {
			if tasks, err := tasksOf(t.Context(), f.q, key); err != nil || len(tasks) != 1 || tasks[0].State != delay.StateDue {
				t.Errorf("%s after requeue-all: %+v, %v; want one pending", key, tasks, err)
			}
		}
	})
}

var deadRowRe = regexp.MustCompile(`<tr data-id="([^"]+)">`)

// TestWebDeadOrder: the dead page lists newest first by default, pages
// toward older letters, and ?order=oldest lists as ListDead does.
func TestWebDeadOrder(t *testing.T) {
	eachConsole(t, true, func(t *testing.T, f *consoleFixture) {
		ctx := t.Context()
		const extra = 118 // 120 dead in all: two full pages and a partial one
		past := time.Now().Add(-time.Hour)
		for i := range extra {
			if _, err := f.q.Enqueue(ctx, delay.Job{Key: fmt.Sprintf("extra-%d", i), When: delay.At(past)}); err != nil {
				t.Fatal(err)
			}
		}
		batch, err := delayraw.Take(ctx, f.q, extra)
		if err != nil || len(batch) != extra {
			t.Fatalf("take: %d, %v", len(batch), err)
		}
		for _, tk := range batch {
			if _, err := delayraw.Kill(ctx, f.q, tk, errors.New("gave up")); err != nil {
				t.Fatal(err)
			}
		}
		all, err := f.q.List(ctx, delay.ListOptions{State: delay.StateDead, Limit: 1000})
		if err != nil || all.Total != extra+2 {
			t.Fatalf("ListDead: %d, %v", all.Total, err)
		}
		oldest := make([]string, len(all.Tasks))
		for i, d := range all.Tasks {
			oldest[i] = d.ID
		}
		newest := slices.Clone(oldest)
		slices.Reverse(newest)
		c := browser(t)
		for _, tc := range []struct {
			query string
			want  []string
		}{
			{"", newest[:deadPageSize]},
			{"&page=2", newest[deadPageSize : 2*deadPageSize]},
			{"&page=3", newest[2*deadPageSize:]},
			{"&page=4", nil},
			{"&order=newest&page=3", newest[2*deadPageSize:]},
			{"&order=oldest", oldest[:deadPageSize]},
			{"&order=oldest&page=3", oldest[2*deadPageSize:]},
		} {
			code, body := get(t, c, f.url+"/dead?queue=orders"+tc.query)
			var got []string
			for _, m := range deadRowRe.FindAllStringSubmatch(body, -1) {
				got = append(got, m[1])
			}
			if code != http.StatusOK || !slices.Equal(got, tc.want) {
				t.Errorf("%s: status %d, rows %v, want %v", tc.query, code, got, tc.want)
			}
		}
		_, body := get(t, c, f.url+"/dead?queue=orders&page=2")
		if !strings.Contains(body, `order=newest&page=1" id="prev">← newer`) || !strings.Contains(body, `order=newest&page=3" id="next">older →`) {
			t.Errorf("page 2 newest first: pager links do not keep the order or say the direction:\n%s", body)
		}
		if code, _ := get(t, c, f.url+"/dead?queue=orders&order=sideways"); code != http.StatusBadRequest {
			t.Errorf("?order=sideways: status %d, want 400", code)
		}
	})
}
