package console

import (
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delayraw"
	"github.com/tierset/tierset/internal/testredis"
)

// formOf returns the hidden fields of the form of body that holds
// marker (an element's id), every value of a repeated name kept.
func formOf(t *testing.T, body, marker string) url.Values {
	t.Helper()
	at := strings.Index(body, marker)
	if at < 0 {
		t.Fatalf("no %s on the page: %.300s", marker, body)
	}
	start, end := strings.LastIndex(body[:at], "<form"), strings.Index(body[at:], "</form>")
	if start < 0 || end < 0 {
		t.Fatalf("%s is in no form", marker)
	}
	v := url.Values{}
	for _, fld := range fieldRe.FindAllStringSubmatch(body[start:at+end], -1) {
		v.Add(fld[1], html.UnescapeString(fld[2]))
	}
	return v
}

// confirmForm loads the confirm page of query cq and returns the form
// its button posts, with the console's token.
func confirmForm(t *testing.T, c *http.Client, base string, cq url.Values) url.Values {
	t.Helper()
	code, body := get(t, c, base+"/confirm?"+cq.Encode())
	m := csrfRe.FindStringSubmatch(body)
	if code != http.StatusOK || m == nil {
		t.Fatalf("confirm page %v: %d: %.300s", cq, code, body)
	}
	form := formOf(t, body, `id="confirm-form"`)
	form.Del("csrf")
	form.Set("csrf", m[1])
	form.Set("token", webToken)
	return form
}

// deadLetters makes n dead letters of q under keys prefix-0.. and
// returns their IDs. Tasks of others it happens to take stay in flight.
func deadLetters(t *testing.T, q *delay.Queue, prefix string, n int) []string {
	t.Helper()
	ctx := t.Context()
	mine := map[string]bool{}
	var ids []string
	for i := range n {
		e, err := q.Enqueue(ctx, delay.Job{Key: fmt.Sprintf("%s-%d", prefix, i), Payload: []byte("p")})
		if err != nil {
			t.Fatal(err)
		}
		mine[e.ID] = true
		ids = append(ids, e.ID)
	}
	deadline := time.Now().Add(10 * time.Second)
	for left := n; left > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d tasks never taken", left, n)
		}
		batch, err := delayraw.Take(ctx, q, 50)
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range batch {
			if mine[tk.ID] {
				if _, err := delayraw.Kill(ctx, q, tk, errors.New("boom")); err != nil {
					t.Fatal(err)
				}
				left--
			}
		}
	}
	return ids
}

// stateOf is task id's state, "gone" when it has none.
func stateOf(t *testing.T, q *delay.Queue, id string) (delay.State, time.Time) {
	t.Helper()
	e, err := q.Task(t.Context(), id)
	if errors.Is(err, delay.ErrNotFound) {
		return "gone", time.Time{}
	}
	if err != nil {
		t.Fatal(err)
	}
	return e.State, e.When
}

// actMsg posts form to /act and returns the message its redirect carries.
func actMsg(t *testing.T, c *http.Client, base string, form url.Values) string {
	t.Helper()
	res := postRaw(t, c, base+"/act", form, nil)
	loc, err := url.Parse(res.Header.Get("Location"))
	if res.StatusCode != http.StatusSeeOther || err != nil || loc.Query().Get("msg") == "" {
		t.Fatalf("POST /act: %d to %q, %v", res.StatusCode, res.Header.Get("Location"), err)
	}
	return loc.Query().Get("msg")
}

// TestConsoleDeleteDeadSkipsRequeued: an operator confirms deleting dead
// letters (one from its task page, a selection from the dead tab);
// before their POST, another operator requeues one of them. The
// requeued task moved on and is a live task they never saw pending: it
// stays due, the others are deleted, and the message counts it skipped.
func TestConsoleDeleteDeadSkipsRequeued(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int
		review func(t *testing.T, c *http.Client, f *consoleFixture, ids []string) url.Values // the confirm page's query
		says   string
	}{
		{"task page", 1, func(t *testing.T, c *http.Client, f *consoleFixture, ids []string) url.Values {
			code, body := get(t, c, f.url+"/task?queue=orders&id="+url.QueryEscape(ids[0]))
			if code != http.StatusOK {
				t.Fatalf("task page: %d", code)
			}
			return formOf(t, body, `id="act-delete"`)
		}, "delete: 0 of 1 tasks (1 skipped: gone, or no longer dead"},
		{"dead tab selection", 3, func(t *testing.T, c *http.Client, f *consoleFixture, ids []string) url.Values {
			code, body := get(t, c, f.url+"/tasks?queue=orders&state=dead")
			if code != http.StatusOK {
				t.Fatalf("dead tab: %d", code)
			}
			cq := formOf(t, body, `id="bulk-submit"`)
			cq.Set("action", "delete")
			cq["id"] = ids
			return cq
		}, "delete: 2 of 3 tasks (1 skipped: gone, or no longer dead"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := seedConsole(t, testredis.Redis(t), true)
			ctx := t.Context()
			c := browser(t)
			ids := deadLetters(t, f.q, "del", tc.n)
			cq := tc.review(t, c, f, ids)
			if cq.Get("state") != "dead" {
				t.Fatalf("the link to the confirm page carries state %q, want dead: %v", cq.Get("state"), cq)
			}
			form := confirmForm(t, c, f.url, cq)
			if form.Get("state") != "dead" || len(form["id"]) != tc.n {
				t.Fatalf("the confirm form carries state %q and %d IDs, want dead and %d", form.Get("state"), len(form["id"]), tc.n)
			}
			if n, err := f.q.Requeue(ctx, delay.Selector{IDs: ids[:1]}); err != nil || n != 1 {
				t.Fatalf("requeue between confirm and POST: %d, %v", n, err)
			}
			if msg := actMsg(t, c, f.url, form); !strings.HasPrefix(msg, tc.says) {
				t.Errorf("message %q, want it to start %q", msg, tc.says)
			}
			if st, when := stateOf(t, f.q, ids[0]); (st != delay.StateDue && st != delay.StateScheduled) || when.After(time.Now().Add(time.Second)) {
				t.Errorf("the requeued task is %s, due %v; want it pending and due now", st, when)
			}
			for _, id := range ids[1:] {
				if st, _ := stateOf(t, f.q, id); st != "gone" {
					t.Errorf("task %s is %s, want deleted", id, st)
				}
			}
			for _, id := range f.deadID {
				if st, _ := stateOf(t, f.q, id); st != delay.StateDead {
					t.Errorf("the fixture's unselected dead letter %s is %s", id, st)
				}
			}
			rows, err := f.srv.readLog(ctx, "", 1)
			if err != nil || len(rows) != 1 || rows[0].Done != tc.n-1 || rows[0].Skipped != 1 {
				t.Errorf("log: %+v, %v; want %d done, 1 skipped", rows, err, tc.n-1)
			}
		})
	}
}

// TestConsoleDeleteSeenState: the state a delete's form carries. Absent
// (a hand-made form), pending or due, the delete is what it always was,
// a Cancel, which removes a task requeued since; a state the console
// never lists is refused, by the confirm page and /act, with nothing
// changed.
func TestConsoleDeleteSeenState(t *testing.T) {
	f := seedConsole(t, testredis.Redis(t), true)
	ctx := t.Context()
	c := browser(t)
	csrf := csrfOf(t, c, f.url+"/dead?queue=orders")
	for i, tc := range []struct {
		name  string
		state []string
		code  int
		want  delay.State
	}{
		{"no state", nil, http.StatusSeeOther, "gone"},
		{"pending", []string{"pending"}, http.StatusSeeOther, "gone"},
		{"due", []string{"due"}, http.StatusSeeOther, "gone"},
		{"bad state", []string{"deadd"}, http.StatusBadRequest, delay.StateDue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := deadLetters(t, f.q, fmt.Sprintf("seen%d", i), 1)[0]
			if n, err := f.q.Requeue(ctx, delay.Selector{IDs: []string{id}}); err != nil || n != 1 {
				t.Fatalf("requeue: %d, %v", n, err)
			}
			form := url.Values{"queue": {"orders"}, "action": {"delete"}, "id": {id}, "csrf": {csrf}, "token": {webToken}, "confirm": {"yes"}}
			if tc.state != nil {
				form["state"] = tc.state
			}
			if tc.code == http.StatusBadRequest {
				cq := url.Values{"queue": {"orders"}, "action": {"delete"}, "id": {id}, "state": tc.state}
				if code, body := get(t, c, f.url+"/confirm?"+cq.Encode()); code != tc.code || !strings.Contains(body, "state") {
					t.Errorf("confirm page: %d, naming the state: %v; want %d", code, strings.Contains(body, "state"), tc.code)
				}
				if code, body := post(t, c, f.url+"/act", form); code != tc.code || !strings.Contains(body, "state") {
					t.Errorf("POST: %d, naming the state: %v; want %d", code, strings.Contains(body, "state"), tc.code)
				}
			} else if msg := actMsg(t, c, f.url, form); msg != "delete: 1 of 1 tasks" {
				t.Errorf("message %q", msg)
			}
			if st, _ := stateOf(t, f.q, id); st != tc.want && !(tc.want == delay.StateDue && st == delay.StateScheduled) {
				t.Errorf("task %s is %s, want %s", id, st, tc.want)
			}
		})
	}
}
