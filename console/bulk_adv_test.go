package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delayraw"
	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/testredis"
)

// bulkForm loads the filter-wide confirm page of cq and returns its
// count and the form its button posts (with the console's token).
func bulkForm(t *testing.T, c *http.Client, base string, cq url.Values) (int64, url.Values) {
	t.Helper()
	cq.Set("scope", "filter")
	code, body := get(t, c, base+"/confirm?"+cq.Encode())
	m := confirmCountRe.FindStringSubmatch(body)
	if code != http.StatusOK || m == nil {
		t.Fatalf("confirm page %v: %d, no count: %.300s", cq, code, body)
	}
	form := url.Values{"csrf": {csrfRe.FindStringSubmatch(body)[1]}, "token": {webToken}}
	for _, fld := range fieldRe.FindAllStringSubmatch(body, -1) {
		if fld[1] != "csrf" {
			form.Set(fld[1], html.UnescapeString(fld[2]))
		}
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n, form
}

// startJob posts form to /act and returns the job page's address.
func startJob(t *testing.T, c *http.Client, base string, form url.Values) string {
	t.Helper()
	res := postRaw(t, c, base+"/act", form, nil)
	loc := res.Header.Get("Location")
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/job?id=") {
		t.Fatalf("POST /act: %d to %q", res.StatusCode, loc)
	}
	return loc
}

// idle waits until no filter-wide job of s runs, for at most 10 s.
func idle(t *testing.T, s *Console) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		n := s.running
		s.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs still running after 10 s", n)
		}
		time.Sleep(10 * time.Millisecond) // a poll with a deadline: the job is a goroutine of s
	}
}

// scriptFault is a go-redis hook: armed, it fails the first mutating
// delay script; with down set it then fails every command after it too,
// as a Redis that went away mid-job would. block, when set, holds every
// mutating script until it is closed. noLog fails every action log write.
type scriptFault struct {
	armed, down, tripped, noLog atomic.Bool
	block                       chan struct{}
}

var errInjected = errors.New("injected: connection reset by peer")

func (h *scriptFault) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptFault) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.down.Load() && h.tripped.Load() {
			return errInjected
		}
		for _, cmd := range cmds {
			if cmd.Name() == "lpush" && h.noLog.Load() {
				return errInjected
			}
		}
		return next(ctx, cmds)
	}
}

func (h *scriptFault) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.down.Load() && h.tripped.Load() {
			return errInjected
		}
		if n := cmd.Name(); (n == "evalsha" || n == "eval") && (&mutationGate{}).mutating(cmd.Args()) {
			if h.block != nil {
				select {
				case <-h.block:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			if h.armed.CompareAndSwap(true, false) {
				h.tripped.Store(true)
				return errInjected
			}
		}
		return next(ctx, cmd)
	}
}

// hookedConsole is seedConsoleWith on real Redis with h on the console's client.
func hookedConsole(t *testing.T, h redis.Hook, edit func(*Options)) *consoleFixture {
	t.Helper()
	b := testredis.Redis(t)
	hooked := redis.NewClient(b.Client.(*redis.Client).Options())
	hooked.AddHook(h)
	t.Cleanup(func() { _ = hooked.Close() })
	return seedConsoleWith(t, b, true, func(o *Options) {
		o.Client = hooked
		if edit != nil {
			edit(o)
		}
	})
}

// TestConsoleBulkAdvRefused: a filter-wide POST the console must refuse
// starts no job and changes nothing: from another origin, a cross-site
// fetch, reschedule (left out of the filter-wide actions), an action
// the state does not allow, a confirm time that is not one.
func TestConsoleBulkAdvRefused(t *testing.T) {
	f := seedConsole(t, testredis.Redis(t), true)
	ctx := t.Context()
	c := browser(t)
	_, form := bulkForm(t, c, f.url, url.Values{"queue": {"orders"}, "state": {"dead"}, "action": {"requeue"}})
	for _, tc := range []struct {
		name string
		edit url.Values
		hdr  http.Header
		code int
		says string
	}{
		{"other origin", nil, http.Header{"Origin": {"https://evil.example"}}, http.StatusForbidden, ""},
		{"cross-site fetch", nil, http.Header{"Sec-Fetch-Site": {"cross-site"}}, http.StatusForbidden, ""},
		{"reschedule", url.Values{"action": {"reschedule"}, "state": {"scheduled"}, "at": {"2030-01-01T00:00"}}, nil, http.StatusBadRequest, "reschedule"},
		{"requeue on due", url.Values{"action": {"requeue"}, "state": {"due"}}, nil, http.StatusBadRequest, "requeue"},
		{"no confirm time", url.Values{"asof": {"0"}}, nil, http.StatusBadRequest, "asof"},
		{"negative count", url.Values{"expected": {"-1"}}, nil, http.StatusBadRequest, "expected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := url.Values{}
			for k, v := range form {
				bad[k] = v
			}
			for k, v := range tc.edit {
				bad[k] = v
			}
			if tc.hdr != nil {
				if res := postRaw(t, c, f.url+"/act", bad, tc.hdr); res.StatusCode != tc.code || res.Header.Get("Location") != "" {
					t.Fatalf("POST: %d to %q, want %d", res.StatusCode, res.Header.Get("Location"), tc.code)
				}
				return
			}
			if code, body := post(t, c, f.url+"/act", bad); code != tc.code || !strings.Contains(body, tc.says) {
				t.Fatalf("POST: %d, naming %q: %v; want %d", code, tc.says, strings.Contains(body, tc.says), tc.code)
			}
			if _, ok := tc.edit["state"]; ok { // its confirm page refuses it too
				q := url.Values{"scope": {"filter"}, "queue": {"orders"}}
				for k, v := range tc.edit {
					q[k] = v
				}
				if code, body := get(t, c, f.url+"/confirm?"+q.Encode()); code != http.StatusBadRequest || !strings.Contains(body, tc.says) {
					t.Errorf("its confirm page: %d, naming %q: %v", code, tc.says, strings.Contains(body, tc.says))
				}
			}
		})
	}
	idle(t, f.srv)
	if n, err := f.b.Client.Keys(ctx, f.b.Prefix+":console:job:*").Result(); err != nil || len(n) != 0 {
		t.Errorf("jobs made: %v, %v", n, err)
	}
	if rows, err := f.srv.readLog(ctx, "", 10); err != nil || len(rows) != 0 {
		t.Errorf("log: %+v, %v", rows, err)
	}
	if st, err := f.q.Stats(ctx); err != nil || st.Dead != 2 {
		t.Errorf("dead %d, %v: want the fixture's 2 untouched", st.Dead, err)
	}
}

// TestConsoleBulkAdvLogin: under a login the log names the maker by a
// short hash, never the session ID; after logout the same cookie and
// CSRF token start nothing.
func TestConsoleBulkAdvLogin(t *testing.T) {
	f := seedConsole(t, testredis.Redis(t), false)
	ctx := t.Context()
	c := browser(t)
	cookie, csrf := logIn(t, c, f.url)
	_, form := bulkForm(t, c, f.url, url.Values{"queue": {"orders"}, "state": {"dead"}, "action": {"requeue"}})
	form.Del("token")
	js := waitJob(t, c, f.url, startJob(t, c, f.url, form))
	if js.status != "done" || js.done != 2 {
		t.Fatalf("job %+v, want 2 requeued", js)
	}
	rows, err := f.srv.readLog(ctx, "orders", 10)
	if err != nil || len(rows) != 1 {
		t.Fatalf("log %+v, %v", rows, err)
	}
	if w := rows[0].Who; !strings.HasPrefix(w, "login ") || strings.Contains(w, cookie) || len(strings.Fields(w)[1]) != 8 {
		t.Errorf("who %q: want a login named by an 8-digit hash, never its ID", w)
	}
	if code, _ := post(t, c, f.url+"/logout", url.Values{"csrf": {csrf}}); code != http.StatusSeeOther {
		t.Fatalf("logout: %d", code)
	}
	// The application kills two more; the old login's replay moves none.
	e, err := f.q.Enqueue(ctx, delay.Job{Key: "replay"})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := delayraw.Take(ctx, f.q, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range batch {
		if tk.ID == e.ID {
			if _, err := delayraw.Kill(ctx, f.q, tk, errors.New("x")); err != nil {
				t.Fatal(err)
			}
		}
	}
	form.Set("asof", strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10))
	res := postRaw(t, &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		f.url+"/act", form, http.Header{"Cookie": {authCookie + "=" + cookie}})
	if strings.HasPrefix(res.Header.Get("Location"), "/job") || res.StatusCode == http.StatusOK {
		t.Errorf("replay after logout: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	idle(t, f.srv)
	if rows, err := f.srv.readLog(ctx, "orders", 10); err != nil || len(rows) != 1 {
		t.Errorf("after the replay the log has %d entries, %v; want 1", len(rows), err)
	}
}

// TestConsoleBulkAdvCountBound: matches that appear between the confirm
// page and the job (scheduled after the count; due with a time before
// it), or a filter widened in the posted form, are not acted on past the
// count: done never exceeds what the operator confirmed, and done +
// skipped is that count.
func TestConsoleBulkAdvCountBound(t *testing.T) {
	for _, tc := range []struct {
		name, state, action string
		when                delay.When
		late                int        // added after the count
		edit                url.Values // the posted form changed
		left                delay.State
		remain              int // tasks left in state left (the fixture has 3 scheduled, none due)
	}{
		{"scheduled run", "scheduled", "run", delay.After(time.Hour), 2, nil, delay.StateScheduled, 5},
		{"due delete", "due", "delete", delay.At(time.Now().Add(-time.Hour)), 2, nil, delay.StateDue, 2},
		{"filter widened", "scheduled", "delete", delay.After(time.Hour), 0, url.Values{"key": {""}}, delay.StateScheduled, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := seedConsole(t, testredis.Redis(t), true)
			ctx := t.Context()
			c := browser(t)
			add := func(n int) {
				for range n {
					if _, err := f.q.Enqueue(ctx, delay.Job{Key: "cap-" + tc.state, When: tc.when}); err != nil {
						t.Fatal(err)
					}
				}
			}
			add(3)
			n, form := bulkForm(t, c, f.url, url.Values{"queue": {"orders"}, "state": {tc.state}, "action": {tc.action}, "key": {"cap-"}})
			if n != 3 {
				t.Fatalf("counted %d, want 3", n)
			}
			add(tc.late)
			for k, v := range tc.edit {
				form[k] = v
			}
			loc := startJob(t, c, f.url, form)
			js := waitJob(t, c, f.url, loc)
			if js.status != "done" || js.done != 3 || js.done+js.skipped != js.expected {
				t.Errorf("job %+v: want the 3 counted done, done + skipped = the count", js)
			}
			p, err := f.q.List(ctx, delay.ListOptions{State: tc.left, Limit: 10})
			if err != nil || len(p.Tasks) != tc.remain {
				t.Errorf("%d tasks still %s, %v; want %d", len(p.Tasks), tc.left, err, tc.remain)
			}
			key := f.srv.jobKey(strings.TrimPrefix(loc, "/job?id="))
			if ttl, err := f.b.Client.PTTL(ctx, key).Result(); err != nil || ttl <= bulkKeep-time.Minute || ttl > bulkKeep {
				t.Errorf("job record's TTL %v, %v; want about %v", ttl, err, bulkKeep)
			}
		})
	}
}

// TestConsoleBulkAdvDeleteSkipsRequeued: between a "delete every dead
// task" batch's listing and its script another operator requeues one of
// them. The task moved on: the delete must skip it, not remove it from
// the due set.
func TestConsoleBulkAdvDeleteSkipsRequeued(t *testing.T) {
	gate := &mutationGate{}
	f := hookedConsole(t, gate, nil)
	ctx := t.Context()
	c := browser(t)
	var requeued atomic.Value
	gate.fn = func(ctx context.Context) error {
		p, err := f.q.List(ctx, delay.ListOptions{State: delay.StateDead, Limit: 1})
		if err != nil || len(p.Tasks) != 1 {
			return fmt.Errorf("list: %d, %v", len(p.Tasks), err)
		}
		requeued.Store(p.Tasks[0].ID)
		if n, err := f.q.Requeue(ctx, delay.Selector{IDs: []string{p.Tasks[0].ID}}); err != nil || n != 1 {
			return fmt.Errorf("requeue: %d, %v", n, err)
		}
		return nil
	}
	_, form := bulkForm(t, c, f.url, url.Values{"queue": {"orders"}, "state": {"dead"}, "action": {"delete"}})
	gate.armed.Store(true)
	js := waitJob(t, c, f.url, startJob(t, c, f.url, form))
	if gate.err != nil || !gate.ran {
		t.Fatalf("the requeue between listing and script: ran %v, %v", gate.ran, gate.err)
	}
	if js != (jobState{"done", 2, 1, 1, 1}) {
		t.Errorf("job %+v, want 1 deleted and the requeued one skipped", js)
	}
	id, _ := requeued.Load().(string)
	info, err := f.q.Task(ctx, id)
	if err != nil || info.State != delay.StateDue {
		t.Errorf("the requeued task: %+v, %v; want it due, not deleted", info, err)
	}
}

// TestFaultConsoleBulkBatchFails: the first batch's script fails (and,
// in the second case, Redis stays gone for the job's every later write).
// The job never says done: it records the failure, counts the batch
// whose outcome is unknown neither done nor skipped, and logs it; if not
// even the failure could be written, its page says it went stale.
func TestFaultConsoleBulkBatchFails(t *testing.T) {
	for _, tc := range []struct {
		name string
		down bool
	}{{"script error", false}, {"redis gone", true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := &scriptFault{}
			clock := newFakeClock()
			f := hookedConsole(t, h, func(o *Options) { o.Now = clock.Now })
			ctx := t.Context()
			c := browser(t)
			_, form := bulkForm(t, c, f.url, url.Values{"queue": {"orders"}, "state": {"dead"}, "action": {"requeue"}})
			h.armed.Store(true)
			h.down.Store(tc.down)
			loc := startJob(t, c, f.url, form)
			idle(t, f.srv)
			h.down.Store(false) // Redis is back: read what the job left
			if !h.tripped.Load() {
				t.Fatal("the fault never fired")
			}
			var api jobView
			code, body := get(t, c, f.url+"/api"+loc)
			if err := json.Unmarshal([]byte(body), &api); err != nil || code != http.StatusOK {
				t.Fatalf("/api%s: %d %s", loc, code, body)
			}
			if tc.down {
				if api.Status != "running" || api.Stale {
					t.Fatalf("job %+v: want its last write, running and not yet stale", api)
				}
				clock.Add(bulkStale + time.Second)
				code, body = get(t, c, f.url+"/api"+loc)
				if err := json.Unmarshal([]byte(body), &api); err != nil || code != http.StatusOK || api.Status != "running" || !api.Stale {
					t.Errorf("after %v: %d %+v, want running and stale", bulkStale, code, api)
				}
				return
			}
			if api.Status != "failed" || !strings.Contains(api.Err, "injected") || api.Done != 0 || api.Skipped != 0 || api.Matched != 2 {
				t.Errorf("job %+v: want failed with the cause, 2 matched, none done, none claimed skipped", api)
			}
			rows, err := f.srv.readLog(ctx, "orders", 10)
			if err != nil || len(rows) != 1 || !strings.Contains(rows[0].Result, "failed") || rows[0].Done != 0 || rows[0].Skipped != 0 {
				t.Errorf("log %+v, %v: want one entry saying it failed", rows, err)
			}
			if st, err := f.q.Stats(ctx); err != nil || st.Dead != 2 {
				t.Errorf("dead %d, %v; want the 2 still dead", st.Dead, err)
			}
		})
	}
}

// TestFaultConsoleBulkLogLost: the action log cannot be written. The
// change stands, and both a filter-wide job and a one-task action say
// their log entry is missing.
func TestFaultConsoleBulkLogLost(t *testing.T) {
	h := &scriptFault{}
	f := hookedConsole(t, h, nil)
	ctx := t.Context()
	c := browser(t)
	h.noLog.Store(true)
	_, form := bulkForm(t, c, f.url, url.Values{"queue": {"orders"}, "state": {"dead"}, "action": {"requeue"}})
	loc := startJob(t, c, f.url, form)
	if js := waitJob(t, c, f.url, loc); js.status != "done" || js.done != 2 {
		t.Errorf("job %+v, want done: the log does not undo the change", js)
	}
	var api jobView
	if code, body := get(t, c, f.url+"/api"+loc); json.Unmarshal([]byte(body), &api) != nil || code != http.StatusOK ||
		!strings.Contains(api.Err, "action log") {
		t.Errorf("/api%s: %d %s; want the missing log entry said", loc, code, body)
	}
	e, err := f.q.Enqueue(ctx, delay.Job{Key: "log-lost", When: delay.After(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	csrf := csrfOf(t, c, f.url+"/confirm?queue=orders&action=cancel&id="+e.ID)
	res := postRaw(t, c, f.url+"/act", url.Values{"queue": {"orders"}, "action": {"cancel"}, "id": {e.ID}, "confirm": {"yes"},
		"csrf": {csrf}, "token": {webToken}}, nil)
	if msg, _ := url.QueryUnescape(res.Header.Get("Location")); res.StatusCode != http.StatusSeeOther || !strings.Contains(msg, "not written to the action log") {
		t.Errorf("cancel: %d to %q; want the missing log entry said", res.StatusCode, msg)
	}
	h.noLog.Store(false)
	if rows, err := f.srv.readLog(ctx, "", 10); err != nil || len(rows) != 0 {
		t.Errorf("log %+v, %v; want nothing written", rows, err)
	}
}

// TestConsoleBulkAdvTwoConsoles: two consoles over one Redis run, at
// once, "requeue every dead task" and "delete every dead task" on the
// same 1,102 letters (three batches each). Each letter is acted on by
// one of them: requeued ones are due, none deleted after its requeue.
func TestConsoleBulkAdvTwoConsoles(t *testing.T) {
	b := testredis.Redis(t)
	f := seedConsole(t, b, true)
	ctx := t.Context()
	const n = 1100
	killMany(t, ctx, f.q, n, func(i int) string { return fmt.Sprintf("race-%05d", i) }, func(int) error { return errors.New("x") })
	g, err := New(ctx, Options{Client: b.Client, Token: webToken, Loopback: true, QueuePrefix: b.Prefix, CachePrefix: b.Prefix, IDsTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	other := httptest.NewServer(g)
	t.Cleanup(other.Close)
	before, err := f.q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := browser(t)
	na, fa := bulkForm(t, c, f.url, url.Values{"queue": {"orders"}, "state": {"dead"}, "action": {"requeue"}})
	nb, fb := bulkForm(t, c, other.URL, url.Values{"queue": {"orders"}, "state": {"dead"}, "action": {"delete"}})
	if na != n+2 || nb != n+2 {
		t.Fatalf("counted %d and %d, want %d", na, nb, n+2)
	}
	la, lb := startJob(t, c, f.url, fa), startJob(t, c, other.URL, fb)
	ja, jb := waitJob(t, c, f.url, la), waitJob(t, c, other.URL, lb)
	if ja.status != "done" || jb.status != "done" || ja.done+ja.skipped != na || jb.done+jb.skipped != nb || ja.done+jb.done != na {
		t.Errorf("requeue %+v, delete %+v: want each letter acted on once", ja, jb)
	}
	after, err := f.q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Dead != 0 || after.Pending != before.Pending+ja.done {
		t.Errorf("after: %d dead, %d due; want 0 and %d + the %d requeued", after.Dead, after.Pending, before.Pending, ja.done)
	}
}

// TestConsoleBulkAdvBusy: four jobs run at once per console; the fifth
// POST is refused with 503 and Retry-After, starts nothing, and a slot
// is free again when one ends. The four on the same two dead tasks act
// on each once: two requeued in all.
func TestConsoleBulkAdvBusy(t *testing.T) {
	h := &scriptFault{block: make(chan struct{})}
	f := hookedConsole(t, h, nil)
	ctx := t.Context()
	c := browser(t)
	_, form := bulkForm(t, c, f.url, url.Values{"queue": {"orders"}, "state": {"dead"}, "action": {"requeue"}})
	var locs []string
	for range bulkJobs {
		locs = append(locs, startJob(t, c, f.url, form))
	}
	res := postRaw(t, c, f.url+"/act", form, nil)
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Errorf("fifth job: %d, Retry-After %q; want 503 with it", res.StatusCode, res.Header.Get("Retry-After"))
	}
	close(h.block)
	var done int64
	for _, loc := range locs {
		js := waitJob(t, c, f.url, loc)
		if js.status != "done" || js.done+js.skipped != 2 {
			t.Errorf("job %+v", js)
		}
		done += js.done
	}
	if done != 2 {
		t.Errorf("the four jobs requeued %d in all, want 2", done)
	}
	idle(t, f.srv)
	if n, err := f.b.Client.Keys(ctx, f.b.Prefix+":console:job:*").Result(); err != nil || len(n) != bulkJobs {
		t.Errorf("%d job records, %v; want %d (none for the refused one)", len(n), err, bulkJobs)
	}
	waitJob(t, c, f.url, startJob(t, c, f.url, form))
}

// TestConsoleBulkAdvHostileFilter: a filter's text reaches the confirm
// page, the job page and the log escaped, whatever it holds.
func TestConsoleBulkAdvHostileFilter(t *testing.T) {
	f := seedConsole(t, testredis.Redis(t), true)
	c := browser(t)
	const script = `<script>alert(1)</script>`
	for _, key := range []string{script, "a\nb" + script, "\xff\xfe" + script, strings.Repeat("k", 4000) + script} {
		_, form := bulkForm(t, c, f.url, url.Values{"queue": {"orders"}, "state": {"dead"}, "action": {"delete"}, "err": {key}})
		loc := startJob(t, c, f.url, form)
		if js := waitJob(t, c, f.url, loc); js.status != "done" || js.done != 0 {
			t.Errorf("job %+v", js)
		}
		cq := url.Values{"scope": {"filter"}, "queue": {"orders"}, "state": {"dead"}, "action": {"delete"}, "err": {key}}
		for _, u := range []string{"/confirm?" + cq.Encode(), loc, "/log"} {
			if code, body := get(t, c, f.url+u); code != http.StatusOK || strings.Contains(body, script) {
				t.Errorf("%.60s: %d, unescaped %v", u, code, strings.Contains(body, script))
			}
		}
	}
}

// TestChartAxisDST: a day across a DST change in Europe/Berlin (25 and
// 23 hours of wall clock): a tick per whole hour as it passes, the
// repeated hour labelled twice, and a hover span across the change
// names each end's zone.
func TestChartAxisDST(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skipf("no zone data for Europe/Berlin: %v", err)
	}
	for _, tc := range []struct {
		name  string
		start time.Time // UTC, 1440 minutes from here
		twice string    // a label the day shows twice ("" none)
		tip   string    // the hover span across the change
	}{
		{"fall back", time.Date(2026, 10, 24, 3, 5, 0, 0, time.UTC), "02:00", "Oct 25 02:55 CEST–02:04 CET"},
		{"spring forward", time.Date(2026, 3, 28, 3, 5, 0, 0, time.UTC), "", "Mar 29 01:55 CET–03:04 CEST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := make([]delay.Minute, 1440)
			for i := range h {
				h[i].Start = tc.start.Add(time.Duration(i) * time.Minute)
			}
			c := historyOf(h, berlin).Charts[0]
			if len(c.Ticks) != 24 {
				t.Errorf("%d ticks, want one per hour passed, 24", len(c.Ticks))
			}
			seen := map[string]int{}
			for _, tk := range c.Ticks {
				seen[tk.Label]++
			}
			if tc.twice != "" && seen[tc.twice] != 2 {
				t.Errorf("label %s shown %d times, want 2", tc.twice, seen[tc.twice])
			}
			if tc.twice == "" && seen["02:00"] != 0 {
				t.Errorf("02:00 labelled on a day it never was")
			}
			found := false
			for _, col := range c.Cols {
				found = found || strings.HasPrefix(col.Tip, tc.tip+" ")
			}
			if !found {
				t.Errorf("no hover title %q…", tc.tip)
			}
		})
	}
}

// TestFaultConsoleBulkDeadline: a job whose deadline (bulkTimeout) has
// passed stops before acting and still writes its end, failed with the
// cause, and its log entry: the deadline ends the work, not the record.
func TestFaultConsoleBulkDeadline(t *testing.T) {
	f := seedConsole(t, testredis.Redis(t), true)
	ctx := t.Context()
	sp := bulkSpec{Queue: "orders", Action: "requeue", State: delay.StateDead, AsOf: time.Now().Add(time.Minute), Expected: 2}
	j := bulkJob{ID: randomHex(8), Queue: "orders", Action: sp.Action, Filter: sp.filterText(), Who: "test", Status: "running",
		Expected: sp.Expected, Started: time.Now()}
	if err := f.srv.saveJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	over, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	f.srv.runBulk(over, f.q, sp, j)
	got, err := f.srv.loadJob(ctx, j.ID)
	if err != nil || got.Status != "failed" || !strings.Contains(got.Err, "deadline") || got.Done != 0 || got.Ended.IsZero() {
		t.Errorf("job %+v, %v; want failed by its deadline, ended, none done", got, err)
	}
	if rows, err := f.srv.readLog(ctx, "orders", 10); err != nil || len(rows) != 1 || rows[0].Job != j.ID {
		t.Errorf("log %+v, %v; want the job's entry", rows, err)
	}
	if st, err := f.q.Stats(ctx); err != nil || st.Dead != 2 {
		t.Errorf("dead %d, %v; want the 2 untouched", st.Dead, err)
	}
}

// TestFaultConsoleBulkReplyCut: the network drops the reply of a batch's
// script after Redis ran it (a private redis-server behind the fault
// proxy; go-redis's default retries). The retry must not read as "those
// tasks had moved on": the job says done for every task, none skipped.
func TestFaultConsoleBulkReplyCut(t *testing.T) {
	fy := testredis.StartFaulty(t)
	ctx := t.Context()
	direct := redis.NewClient(&redis.Options{Addr: fy.Server.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = direct.Close() })
	q, err := delay.New(direct, "orders", delay.Options{Prefix: "cut"})
	if err != nil {
		t.Fatal(err)
	}
	killMany(t, ctx, q, 700, func(i int) string { return fmt.Sprintf("cut-%04d", i) }, func(int) error { return errors.New("x") })
	s, err := New(ctx, Options{Client: fy.Cut, Token: webToken, Loopback: true, QueuePrefix: "cut", CachePrefix: "cut", IDsTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	c := browser(t)
	_, form := bulkForm(t, c, hs.URL, url.Values{"queue": {"orders"}, "state": {"dead"}, "action": {"requeue"}})
	fy.Proxy.CutNext(1, faultproxy.Contains(":rp:"))
	js := waitJob(t, c, hs.URL, startJob(t, c, hs.URL, form))
	if fy.Proxy.Cuts() != 1 {
		t.Fatalf("%d replies cut, want 1", fy.Proxy.Cuts())
	}
	if js != (jobState{"done", 700, 700, 0, 2}) {
		t.Errorf("job %+v, want all 700 done in 2 batches", js)
	}
	if st, err := q.Stats(ctx); err != nil || st.Dead != 0 || st.Pending != 700 {
		t.Errorf("%d dead, %d pending, %v; want 0 and 700", st.Dead, st.Pending, err)
	}
}
