package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delayraw"
	"github.com/tierset/tierset/internal/delaytest"
	"github.com/tierset/tierset/internal/testredis"
)

var (
	rowIDRe  = regexp.MustCompile(`<tr data-id="([0-9a-z]+)">`)
	nextRe   = regexp.MustCompile(`href="(/tasks\?[^"]*cursor=[^"]*)" id="next"`)
	verdRe   = regexp.MustCompile(`id="verdict-orders" data-verdict="([a-z ]+)"`)
	bannerID = `id="redis-down"`
)

// TestConsolePages: every page answers its status and shows what it is
// for; bad parameters are 400, unknown IDs and queues 404.
func TestConsolePages(t *testing.T) {
	eachConsole(t, true, func(t *testing.T, f *consoleFixture) {
		c := browser(t)
		dead := f.deadID[0]
		for _, tc := range []struct {
			path string
			code int
			want []string
		}{
			{"/queues", 200, []string{`id="summary"`, `data-queue="orders"`, `data-verdict="idle"`}},
			{"/queue?name=orders", 200, []string{`id="verdict-orders"`, `id="pause"`, `id="no-workers"`}},
			{"/tasks?queue=orders", 200, []string{`id="state-tabs"`, `data-state="due"`}},
			{"/tasks?queue=orders&state=scheduled", 200, []string{`data-total="3"`, `id="bulk-action"`, "<option>reschedule</option>"}},
			{"/tasks?queue=orders&state=inflight", 200, []string{`data-total="1"`, "<option>cancel</option>"}},
			{"/tasks?queue=orders&state=dead", 200, []string{`data-total="2"`, "<option>requeue</option>", "payment service said 503"}},
			{"/tasks?queue=orders&state=done", 200, []string{`data-total="0"`, `id="no-tasks"`}},
			{"/tasks?queue=orders&state=dead&err=503", 200, []string{`data-shown="1"`, "The filter read 2 tasks"}},
			{"/task?queue=orders&id=" + dead, 200, []string{`data-field="state">dead`, `id="act-requeue"`, `id="act-delete"`}},
			{"/workers", 200, []string{`id="no-workers"`}},
			{"/confirm?queue=orders&action=requeue&id=" + dead, 200, []string{`id="confirm-form"`, `name="confirm" value="yes"`, `data-id="` + dead + `"`}},
			{"/confirm?queue=orders&action=pause", 200, []string{`value="pause"`, "Pause: no worker"}},
			{"/tasks?queue=orders&state=nope", 400, nil},
			{"/tasks?queue=orders&order=sideways", 400, nil},
			{"/tasks?queue=orders&cursor=garbage", 400, nil},
			{"/tasks?queue=nosuch", 404, nil},
			{"/task?queue=orders&id=zzzz", 404, nil},
			{"/queue?name=nosuch", 404, nil},
			{"/confirm?queue=orders&action=explode&id=" + dead, 400, nil},
			{"/confirm?queue=orders&action=cancel", 400, []string{"select at least one task"}},
			{"/confirm?queue=orders&action=pause&id=" + dead, 400, nil},
			{"/confirm?queue=orders&action=reschedule&id=" + dead + "&at=tomorrow", 400, nil},
		} {
			code, body := get(t, c, f.url+tc.path)
			if code != tc.code {
				t.Errorf("GET %s: %d, want %d", tc.path, code, tc.code)
				continue
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("GET %s: no %q", tc.path, w)
				}
			}
		}
		if !delaytest.DeadIDs(t, f.q)[dead] {
			t.Errorf("the confirm page changed the task")
		}
	})
}

// TestConsoleBrowsePaging: following "next" through a state lists each
// task once, in ListTasks's order; the key filter keeps its matches only.
func TestConsoleBrowsePaging(t *testing.T) {
	eachConsole(t, true, func(t *testing.T, f *consoleFixture) {
		ctx := t.Context()
		past := time.Now().Add(-time.Hour)
		for i := range 120 {
			if _, err := f.q.Enqueue(ctx, delay.Job{Key: fmt.Sprintf("bulk-%03d", i), When: delay.At(past.Add(time.Duration(i) * time.Millisecond))}); err != nil {
				t.Fatal(err)
			}
		}
		c := browser(t)
		for _, tc := range []struct {
			query string
			want  int
		}{
			{"state=due", 120},
			{"state=due&order=newest", 120},
			{"state=due&key=bulk-1", 20},
			{"state=scheduled", 3},
		} {
			var ids []string
			u := "/tasks?queue=orders&" + tc.query
			for pages := 0; u != ""; pages++ {
				if pages > 10 {
					t.Fatalf("%s: no end after 10 pages", tc.query)
				}
				code, body := get(t, c, f.url+u)
				if code != http.StatusOK {
					t.Fatalf("GET %s: %d", u, code)
				}
				for _, m := range rowIDRe.FindAllStringSubmatch(body, -1) {
					ids = append(ids, m[1])
				}
				u = ""
				if m := nextRe.FindStringSubmatch(body); m != nil {
					u = strings.ReplaceAll(m[1], "&amp;", "&")
				}
			}
			o := delay.ListOptions{State: delay.StateDue, Limit: 1000, Newest: strings.Contains(tc.query, "newest")}
			if strings.Contains(tc.query, "scheduled") {
				o.State = delay.StateScheduled
			}
			if strings.Contains(tc.query, "key=") {
				o.KeyPrefix = "bulk-1"
			}
			p, err := f.q.List(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, e := range p.Tasks {
				want = append(want, e.ID)
			}
			if len(ids) != tc.want || !slices.Equal(ids, want) {
				t.Errorf("%s: pages listed %d tasks, want %d in ListTasks order", tc.query, len(ids), tc.want)
			}
		}
	})
}

// TestConsoleTaskPayload: a JSON payload is shown indented, anything
// else escaped.
func TestConsoleTaskPayload(t *testing.T) {
	t.Parallel()
	eachConsole(t, true, func(t *testing.T, f *consoleFixture) {
		c := browser(t)
		for _, tc := range []struct {
			payload string
			want    string
		}{
			{`{"order":7,"lines":[1,2]}`, "{\n  &#34;order&#34;: 7,\n  &#34;lines&#34;: [\n    1,\n    2\n  ]\n}"},
			{`<b>bold</b> & not JSON`, "&lt;b&gt;bold&lt;/b&gt; &amp; not JSON"},
			{"\xff\xfebinary", `\xff\xfebinary`},
		} {
			e, err := f.q.Enqueue(t.Context(), delay.Job{Key: "payload", Payload: []byte(tc.payload), When: delay.After(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			code, body := get(t, c, f.url+"/task?queue=orders&id="+e.ID)
			if code != http.StatusOK || !strings.Contains(body, tc.want) || strings.Contains(body, "<b>") {
				t.Errorf("payload %q: %d, want %q in\n%s", tc.payload, code, tc.want, body)
			}
		}
	})
}

// TestConsoleRedisDown: with Redis unreachable every page is the banner
// and 503, not a page that reads as empty.
func TestConsoleRedisDown(t *testing.T) {
	t.Parallel()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 200 * time.Millisecond, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	srv, err := New(t.Context(), Options{Client: client, Token: webToken, Loopback: true, Queues: []string{"orders"}, IDsTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	hs := newServer(t, srv)
	c := browser(t)
	for _, page := range []string{"/queues", "/queue?name=orders", "/tasks?queue=orders", "/task?queue=orders&id=1",
		"/workers", "/dead?queue=orders", "/promotions", "/promotion?id=x", "/login"} {
		code, body := get(t, c, hs+page)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, bannerID) || !strings.Contains(body, "connect") {
			t.Errorf("GET %s with Redis down: %d, banner %v", page, code, strings.Contains(body, bannerID))
		}
	}
	for _, api := range []string{"/api/queues", "/api/tasks?queue=orders", "/api/task?queue=orders&id=1", "/api/workers"} {
		code, body := get(t, c, hs+api)
		if code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "{\n  \"error\": ") || !strings.Contains(body, "connect") {
			t.Errorf("GET %s with Redis down: %d %q, want 503 with a JSON error", api, code, body)
		}
	}
	if code, _ := get(t, c, hs+"/style.css"); code != http.StatusOK {
		t.Errorf("style.css with Redis down: %d, want 200", code)
	}
}

// TestConsoleNoWorkerVersusBehind: due tasks and no live worker read "no
// worker"; a live worker that does not take them because the queue is
// paused reads "paused", not "behind".
func TestConsoleNoWorkerVersusBehind(t *testing.T) {
	eachConsole(t, true, func(t *testing.T, f *consoleFixture) {
		ctx := t.Context()
		if _, err := f.q.Enqueue(ctx, delay.Job{Key: "late", When: delay.At(time.Now().Add(-2 * time.Minute))}); err != nil {
			t.Fatal(err)
		}
		c := browser(t)
		verdict := func() string {
			_, body := get(t, c, f.url+"/queue?name=orders")
			if m := verdRe.FindStringSubmatch(body); m != nil {
				return m[1]
			}
			return ""
		}
		if v := verdict(); v != "no worker" {
			t.Fatalf("due tasks, no worker: verdict %q", v)
		}
		if err := f.q.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		w, _ := delaytest.StartWorker(t, ctx, f.q, func(context.Context, *delay.Task) error { return nil }, delay.PoolOptions{Heartbeat: time.Second})
		deadline := time.Now().Add(10 * time.Second)
		for {
			ws, err := delay.ListWorkers(ctx, f.b.Client, f.b.Prefix)
			if err != nil {
				t.Fatal(err)
			}
			if len(ws) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the worker did not register within 10 s")
			}
			time.Sleep(20 * time.Millisecond) // poll, with the deadline above
		}
		if v := verdict(); v != "paused" {
			t.Errorf("a live worker of a paused queue, a task 2 min late: verdict %q, want paused", v)
		}
		_, body := get(t, c, f.url+"/workers")
		if !strings.Contains(body, `id="workers"`) || !strings.Contains(body, w.ID()) {
			t.Errorf("the workers page does not list %s", w.ID())
		}
		_, body = get(t, c, f.url+"/queues")
		if !strings.Contains(body, `data-verdict="paused"`) || !strings.Contains(body, `class="paused">paused`) {
			t.Errorf("the summary does not show the queue paused")
		}
	})
}

// TestWebWorkersAgeByRedisClock: the workers page shows a pool's last
// beat by Redis's clock: a console whose clock runs 30 s ahead shows a
// pool beating every second as just seen, not 30 s late.
func TestWebWorkersAgeByRedisClock(t *testing.T) {
	t.Parallel()
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
		f := seedConsoleWith(t, b, true, func(o *Options) {
			o.Now = func() time.Time { return time.Now().Add(30 * time.Second) }
		})
		ctx := t.Context()
		w, _ := delaytest.StartWorker(t, ctx, f.q, func(context.Context, *delay.Task) error { return nil }, delay.PoolOptions{Heartbeat: time.Second})
		deadline := time.Now().Add(10 * time.Second)
		for {
			ws, err := f.q.Workers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(ws) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the worker did not register within 10 s")
			}
			time.Sleep(20 * time.Millisecond) // poll, with the deadline above
		}
		_, body := get(t, browser(t), f.url+"/workers")
		row := regexp.MustCompile(`(?s)<tr data-id="` + regexp.QuoteMeta(w.ID()) + `">.*?</tr>`).FindString(body)
		if row == "" {
			t.Fatalf("the workers page does not list %s", w.ID())
		}
		if strings.Contains(row, `class="err"`) || !regexp.MustCompile(`<td>[0-3]s ago</td>`).MatchString(row) {
			t.Errorf("a pool beating every second, console clock 30 s ahead:\n%s", row)
		}
	})
}

func newServer(t *testing.T, h http.Handler) string {
	t.Helper()
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestConsoleTaskErrors: the task page shows the last error and, under
// it, the earlier ones the record keeps, newest first and escaped; a task
// with one error or none has no earlier list.
func TestConsoleTaskErrors(t *testing.T) {
	eachConsole(t, true, func(t *testing.T, f *consoleFixture) {
		c := browser(t)
		ctx := t.Context()
		// The seed left no task due: this one is the only one Take finds.
		e, err := f.q.Enqueue(ctx, delay.Job{Key: "errors", When: delay.After(0)})
		if err != nil {
			t.Fatal(err)
		}
		steps := []error{errors.New("stock <service> timed out"), nil, errors.New("stock service said 503")}
		for i, cause := range steps {
			batch, err := delayraw.Take(ctx, f.q, 1)
			if err != nil || len(batch) != 1 || batch[0].ID != e.ID {
				t.Fatalf("take %d: %+v, %v; want task %s", i, batch, err, e.ID)
			}
			if i < len(steps)-1 {
				_, err = delayraw.RetryAfter(ctx, f.q, batch[0], 0, cause)
			} else {
				_, err = delayraw.Kill(ctx, f.q, batch[0], cause)
			}
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		code, body := get(t, c, f.url+"/task?queue=orders&id="+e.ID)
		want := `<td class="error" data-field="error">stock service said 503</td>` +
			`</tr>
  <tr><th>earlier errors<br><small>newest first</small></th><td><ol class="errors" data-field="errors">` +
			`<li class="error">(no error given)</li><li class="error">stock &lt;service&gt; timed out</li></ol>`
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("task with three errors: %d, want %q in\n%s", code, want, body)
		}
		code, body = get(t, c, f.url+"/task?queue=orders&id="+f.deadID[1])
		if code != http.StatusOK || !strings.Contains(body, "payment service said 503") || strings.Contains(body, `data-field="errors"`) {
			t.Errorf("task with one error: %d, want it alone in\n%s", code, body)
		}
	})
}
