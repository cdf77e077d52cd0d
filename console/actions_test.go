package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delayraw"
)

// TestConsoleActions: each action, one task and in bulk, goes through its
// confirm page (which changes nothing) and a POST with the CSRF token and
// the console's token, and does what it says to the tasks in Redis.
func TestConsoleActions(t *testing.T) {
	eachConsole(t, true, func(t *testing.T, f *consoleFixture) {
		ctx := t.Context()
		at := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Minute)
		enq := func(key string, w delay.When) string {
			e, err := f.q.Enqueue(ctx, delay.Job{Key: key, Payload: []byte("p"), When: w})
			if err != nil {
				t.Fatal(err)
			}
			return e.ID
		}
		kill := func(key string) string {
			id := enq(key, delay.When{})
			for range 50 {
				batch, err := delayraw.Take(ctx, f.q, 50)
				if err != nil {
					t.Fatal(err)
				}
				for _, tk := range batch {
					if tk.ID == id {
						if _, err := delayraw.Kill(ctx, f.q, tk, errors.New("boom")); err != nil {
							t.Fatal(err)
						}
						return id
					}
				}
			}
			t.Fatalf("task %s never taken", id)
			return ""
		}
		state := func(id string) (delay.State, time.Time) {
			e, err := f.q.Task(ctx, id)
			if errors.Is(err, delay.ErrNotFound) {
				return "gone", time.Time{}
			}
			if err != nil {
				t.Fatal(err)
			}
			return e.State, e.When
		}
		for _, tc := range []struct {
			name   string
			action string
			ids    func() []string
			at     string
			check  func(ids []string) error
		}{
			{"cancel one", "cancel", func() []string { return []string{enq("c1", delay.After(time.Hour))} }, "",
				func(ids []string) error { return want(state, ids, "gone") }},
			{"cancel bulk", "cancel", func() []string {
				return []string{enq("cb1", delay.After(time.Hour)), enq("cb2", delay.After(time.Hour)), enq("cb3", delay.After(time.Hour))}
			}, "", func(ids []string) error { return want(state, ids, "gone") }},
			{"run now", "run", func() []string { return []string{enq("r1", delay.After(time.Hour))} }, "",
				func(ids []string) error {
					return wantDueNow(state, ids)
				}},
			{"reschedule bulk", "reschedule", func() []string {
				return []string{enq("s1", delay.After(time.Hour)), enq("s2", delay.After(time.Minute))}
			}, at.Format("2006-01-02T15:04"), func(ids []string) error {
				for _, id := range ids {
					if _, when := state(id); !when.Equal(at) {
						return fmt.Errorf("%s due %v, want %v", id, when, at)
					}
				}
				return nil
			}},
			{"requeue dead", "requeue", func() []string { return []string{kill("q1"), kill("q2")} }, "",
				func(ids []string) error { return wantDueNow(state, ids) }},
			{"delete dead", "delete", func() []string { return []string{kill("d1")} }, "",
				func(ids []string) error { return want(state, ids, "gone") }},
			{"delete pending", "delete", func() []string { return []string{enq("d2", delay.After(time.Hour))} }, "",
				func(ids []string) error { return want(state, ids, "gone") }},
			{"pause", "pause", func() []string { return nil }, "", func([]string) error {
				if st, _ := f.q.Stats(ctx); !st.Paused {
					return errors.New("not paused")
				}
				return nil
			}},
			{"resume", "resume", func() []string { return nil }, "", func([]string) error {
				if st, _ := f.q.Stats(ctx); st.Paused {
					return errors.New("still paused")
				}
				return nil
			}},
		} {
			c := browser(t)
			ids := tc.ids()
			q := url.Values{"queue": {"orders"}, "action": {tc.action}, "id": ids, "back": {"/tasks?queue=orders"}}
			if tc.at != "" {
				q.Set("at", tc.at)
			}
			code, body := get(t, c, f.url+"/confirm?"+q.Encode())
			m := csrfRe.FindStringSubmatch(body)
			if code != http.StatusOK || m == nil {
				t.Fatalf("%s: confirm page %d", tc.name, code)
			}
			if tc.action != "pause" && tc.action != "resume" && tc.check(ids) == nil {
				t.Fatalf("%s: done before the POST", tc.name)
			}
			form := url.Values{"queue": {"orders"}, "action": {tc.action}, "id": ids, "csrf": {m[1]}, "token": {webToken}, "confirm": {"yes"}, "back": {"/tasks?queue=orders"}}
			for _, at := range fieldRe.FindAllStringSubmatch(body, -1) {
				if at[1] == "at" {
					form.Set("at", at[2])
				}
			}
			// Without the confirm field, the CSRF token or the console's token: refused, nothing done.
			refusedWithout(t, c, f.url+"/act", form, tc.name)
			if tc.action != "pause" && tc.action != "resume" && tc.check(ids) == nil {
				t.Fatalf("%s: done by a refused POST", tc.name)
			}
			resp := postRaw(t, c, f.url+"/act", form, nil)
			loc := resp.Header.Get("Location")
			if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/tasks?queue=orders&msg=") {
				t.Errorf("%s: %d to %q", tc.name, resp.StatusCode, loc)
			}
			if err := tc.check(ids); err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
		}
	})
}

var fieldRe = regexp.MustCompile(`<input type="hidden" name="([a-z]+)" value="([^"]*)">`)

// want checks that every task of ids is in state st ("gone": none).
// wantDueNow checks each task is back in the due set, due now: List
// splits due from scheduled at its estimate of Redis TIME, which may trail
// the TIME the action's script used by a millisecond, so a task due this
// very millisecond may read as scheduled; its due time says it is now.
func wantDueNow(state func(string) (delay.State, time.Time), ids []string) error {
	for _, id := range ids {
		st, when := state(id)
		if st != delay.StateDue && st != delay.StateScheduled {
			return fmt.Errorf("task %s is %s, want due", id, st)
		}
		if when.After(time.Now().Add(time.Second)) {
			return fmt.Errorf("task %s due %v, want now", id, when)
		}
	}
	return nil
}

func want(state func(string) (delay.State, time.Time), ids []string, st delay.State) error {
	for _, id := range ids {
		if got, _ := state(id); got != st {
			return fmt.Errorf("task %s is %s, want %s", id, got, st)
		}
	}
	return nil
}
