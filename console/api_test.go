package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/opsview"
)

// The /api answers equal what delay reads (Stats, List, Task), in the
// field names of internal/opsview, and a bad request is a JSON error with
// the status its HTML page would have.
func TestAPIEqualsDelay(t *testing.T) {
	t.Parallel()
	eachConsole(t, true, func(t *testing.T, f *consoleFixture) {
		c := browser(t)
		getJSON := func(path string, v any) int {
			t.Helper()
			code, body := get(t, c, f.url+path)
			if err := json.Unmarshal([]byte(body), v); err != nil {
				t.Fatalf("GET %s: %d, not JSON: %v\n%s", path, code, err, body)
			}
			return code
		}

		var qs []opsview.Queue
		if code := getJSON("/api/queues", &qs); code != http.StatusOK || len(qs) != 1 {
			t.Fatalf("/api/queues: %d, %+v", code, qs)
		}
		st, err := f.q.Stats(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if want := opsview.QueueOf("orders", st); qs[0].Ready != want.Ready || qs[0].Scheduled != want.Scheduled ||
			qs[0].InFlight != want.InFlight || qs[0].Dead != want.Dead || qs[0].DeadLettered != want.DeadLettered || qs[0].Name != "orders" {
			t.Errorf("/api/queues %+v, Stats view %+v", qs[0], want)
		}

		var page opsview.Page
		if code := getJSON("/api/tasks?queue=orders&state=dead", &page); code != http.StatusOK {
			t.Fatalf("/api/tasks: %d", code)
		}
		p, err := f.q.List(t.Context(), delay.ListOptions{State: delay.StateDead, Newest: true})
		if err != nil {
			t.Fatal(err)
		}
		if page.Total != p.Total || len(page.Tasks) != len(f.deadID) || page.State != "dead" {
			t.Fatalf("/api/tasks dead: %+v, List total %d", page, p.Total)
		}
		for i, tk := range page.Tasks {
			if tk.ID != p.Tasks[i].ID || tk.LastError != p.Tasks[i].LastError || tk.Payload != nil || tk.PayloadBytes != len(p.Tasks[i].Payload) {
				t.Errorf("/api/tasks task %d: %+v, List %+v", i, tk, p.Tasks[i])
			}
		}

		var task opsview.Task
		if code := getJSON("/api/task?queue=orders&id="+url.QueryEscape(f.deadID[0]), &task); code != http.StatusOK {
			t.Fatalf("/api/task: %d", code)
		}
		if task.ID != f.deadID[0] || task.State != "dead" || string(task.PayloadBase64) != "expire reservation" || task.LastError != xssError {
			t.Errorf("/api/task: %+v", task)
		}

		for _, tc := range []struct {
			path string
			code int
		}{
			{"/api/tasks?queue=orders&state=later", http.StatusBadRequest},
			{"/api/tasks?queue=nope", http.StatusNotFound},
			{"/api/task?queue=orders&id=zzzzzz", http.StatusNotFound},
			{"/api/queues?x=1", http.StatusOK},
			{"/api/workers", http.StatusOK},
		} {
			var v map[string]any
			var list []any
			target := any(&v)
			if tc.code == http.StatusOK {
				target = &list
			}
			if code := getJSON(tc.path, target); code != tc.code || tc.code != http.StatusOK && v["error"] == "" {
				t.Errorf("GET %s: %d %v, want %d with an error", tc.path, code, v, tc.code)
			}
		}
	})
}
