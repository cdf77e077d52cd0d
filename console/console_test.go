package console

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/delayraw"
	"github.com/tierset/tierset/internal/delaytest"
	"github.com/tierset/tierset/internal/testredis"
)

const (
	xssName  = `<script>alert("promo")</script>`
	xssError = `<script>alert("dead")</script> & more`
	xssGift  = `<img src=x onerror=alert(1)>`
	webToken = "test-token-0123456789"
)

// consoleFixture is a console on a backend seeded with one queue (pending,
// due soon, in flight and dead tasks) and two promotions.
type consoleFixture struct {
	b      *testredis.Backend
	srv    *Console
	url    string
	q      *delay.Queue
	c      *cache.Cache
	deadID []string
	promos []gradient.Promotion
}

func seedConsole(t *testing.T, b *testredis.Backend, loopback bool) *consoleFixture {
	t.Helper()
	return seedConsoleWith(t, b, loopback, nil)
}

// eachConsole runs fn as a subtest per backend (testredis.Each) on a
// console seeded there (seedConsole).
func eachConsole(t *testing.T, loopback bool, fn func(t *testing.T, f *consoleFixture)) {
	t.Helper()
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) { fn(t, seedConsole(t, b, loopback)) })
}

// seedConsoleWith is seedConsole with the console's config changed by edit.
func seedConsoleWith(t *testing.T, b *testredis.Backend, loopback bool, edit func(*Options)) *consoleFixture {
	t.Helper()
	ctx := t.Context()
	f := &consoleFixture{b: b}
	var err error
	if f.q, err = delay.New(b.Client, "orders", delay.Options{Prefix: b.Prefix}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if b.Mini != nil {
		b.Mini.SetTime(now)
	}
	for i, d := range []time.Duration{-time.Hour, -time.Minute, -time.Second, 20 * time.Second, 40 * time.Second, time.Hour} {
		if _, err := f.q.Enqueue(ctx, delay.Job{Key: fmt.Sprintf("order-%d", i), Payload: []byte("expire reservation"), When: delay.At(now.Add(d))}); err != nil {
			t.Fatal(err)
		}
	}
	batch, err := delayraw.Take(ctx, f.q, 3) // the three overdue ones
	if err != nil || len(batch) != 3 {
		t.Fatalf("take: %d tasks, %v", len(batch), err)
	}
	if _, err := delayraw.Kill(ctx, f.q, batch[0], errors.New(xssError)); err != nil {
		t.Fatal(err)
	}
	if _, err := delayraw.Kill(ctx, f.q, batch[1], errors.New("payment service said 503")); err != nil {
		t.Fatal(err)
	}
	f.deadID = []string{batch[0].ID, batch[1].ID}
	pct := func(p int64) gradient.Reward {
		return gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(p)}
	}
	f.promos = []gradient.Promotion{
		{ID: xssName, Metric: gradient.Quantity, Tiers: []gradient.Tier{
			{ID: "3+", Threshold: decimal.NewFromInt(3), Reward: pct(10)},
			{ID: "5+", Threshold: decimal.NewFromInt(5), Reward: pct(20), Gifts: []gradient.Gift{{SKU: "tote", Qty: 1, Name: xssGift}}},
		}},
		{ID: "spend-more", Metric: gradient.Amount, MinorDigits: 2, Tiers: []gradient.Tier{
			{ID: "100", Threshold: decimal.NewFromInt(100), Reward: gradient.Reward{Kind: gradient.AmountOff, Amount: decimal.NewFromInt(10)}},
			{ID: "199.99", Threshold: decimal.RequireFromString("199.99"), Reward: gradient.Reward{Kind: gradient.AmountOff, Amount: decimal.NewFromInt(30)}},
		}},
	}
	if f.c, err = cache.New(b.Client, cache.Options{Prefix: b.Prefix}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Refresh(ctx, f.promos...); err != nil {
		t.Fatal(err)
	}
	cfg := Options{Client: b.Client, Redis: "redis://:xxxxx@test", Token: webToken,
		Loopback: loopback, QueuePrefix: b.Prefix, CachePrefix: b.Prefix, IDsTTL: -1}
	if edit != nil {
		edit(&cfg)
	}
	f.srv, err = New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(f.srv)
	t.Cleanup(hs.Close)
	f.url = hs.URL
	return f
}

// browser is an HTTP client with a cookie jar, like one browser tab.
func browser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	return send(t, c, http.MethodGet, u, nil)
}

// refusedWithout posts form to u once without each of the fields a
// change needs (confirm, the CSRF token, the console's token) and fails
// unless every such POST is refused (400 or 403).
func refusedWithout(t *testing.T, c *http.Client, u string, form url.Values, what string) {
	t.Helper()
	for _, drop := range []string{"confirm", "csrf", "token"} {
		bad := url.Values{}
		for k, v := range form {
			if k != drop {
				bad[k] = v
			}
		}
		if code, _ := post(t, c, u, bad); code != http.StatusBadRequest && code != http.StatusForbidden {
			t.Errorf("%s without %s: %d, want 400 or 403", what, drop, code)
		}
	}
}

func post(t *testing.T, c *http.Client, u string, form url.Values) (int, string) {
	t.Helper()
	return send(t, c, http.MethodPost, u, form)
}

// send makes one request (a form POST when form is not nil) and reads the answer.
func send(t *testing.T, c *http.Client, method, u string, form url.Values) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(t.Context(), method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// csrfOf loads a page and returns its CSRF form token.
func csrfOf(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	code, body := get(t, c, u)
	m := csrfRe.FindStringSubmatch(body)
	if code != http.StatusOK || m == nil {
		t.Fatalf("GET %s: %d, no csrf token", u, code)
	}
	return m[1]
}

// TestWebEscapesEverything: a promotion ID, a gift name and a dead task's
// error holding markup reach every page escaped, never as markup.
func TestWebEscapesEverything(t *testing.T) {
	t.Parallel()
	eachConsole(t, true, func(t *testing.T, f *consoleFixture) {
		c := browser(t)
		for _, page := range []string{"/queues", "/dead?queue=orders", "/promotions", "/promotions?q=" + url.QueryEscape("<script"),
			"/promotion?id=" + url.QueryEscape(xssName) + "&value=5", "/promotion?id=" + url.QueryEscape(xssName) + "&value=" + url.QueryEscape("<b>"),
			"/dead/purge?queue=orders&id=" + url.QueryEscape("<script>"), "/promotion?id=" + url.QueryEscape("<script>x")} {
			_, body := get(t, c, f.url+page)
			for _, raw := range []string{"<script", "<img", "<b>"} {
				if strings.Contains(body, raw) {
					t.Errorf("%s holds %q unescaped", page, raw)
				}
			}
		}
		_, body := get(t, c, f.url+"/dead?queue=orders")
		if !strings.Contains(body, "&lt;script&gt;alert(&#34;dead&#34;)&lt;/script&gt; &amp; more") {
			t.Errorf("the dead task's error is not shown escaped:\n%s", body)
		}
		_, body = get(t, c, f.url+"/promotion?id="+url.QueryEscape(xssName)+"&value=5")
		if !strings.Contains(body, "&lt;script&gt;alert(&#34;promo&#34;)&lt;/script&gt;") || !strings.Contains(body, "&lt;img src=x onerror=alert(1)&gt;") {
			t.Errorf("the promotion's ID or gift is not shown escaped:\n%s", body)
		}
	})
}

// TestWebChangesNeedPostCSRFAndToken: a requeue without the CSRF token,
// without the console's token or by GET is refused and changes nothing;
// with both (form token or login cookie) it moves the task out of the dead set.
func TestWebChangesNeedPostCSRFAndToken(t *testing.T) {
	t.Parallel()
	eachConsole(t, true, func(t *testing.T, f *consoleFixture) {
		c := browser(t)
		csrf := csrfOf(t, c, f.url+"/dead?queue=orders")
		id := f.deadID[1]
		for _, tc := range []struct {
			name string
			form url.Values
			want int
		}{
			{"no csrf", url.Values{"queue": {"orders"}, "id": {id}, "token": {webToken}}, http.StatusForbidden},
			{"wrong csrf", url.Values{"queue": {"orders"}, "id": {id}, "token": {webToken}, "csrf": {strings.Repeat("0", 64)}}, http.StatusForbidden},
			{"no token", url.Values{"queue": {"orders"}, "id": {id}, "csrf": {csrf}}, http.StatusForbidden},
			{"wrong token", url.Values{"queue": {"orders"}, "id": {id}, "csrf": {csrf}, "token": {"guess"}}, http.StatusForbidden},
		} {
			if code, _ := post(t, c, f.url+"/dead/requeue", tc.form); code != tc.want {
				t.Errorf("%s: status %d, want %d", tc.name, code, tc.want)
			}
			if !delaytest.DeadIDs(t, f.q)[id] {
				t.Fatalf("%s: the task left the dead set", tc.name)
			}
		}
		if code, _ := get(t, c, f.url+"/dead/requeue?queue=orders&id="+id+"&csrf="+csrf+"&token="+webToken); code != http.StatusMethodNotAllowed {
			t.Errorf("GET requeue: status %d, want 405", code)
		}
		// Another browser's CSRF token does not fit this browser's cookie.
		other := csrfOf(t, browser(t), f.url+"/dead?queue=orders")
		if code, _ := post(t, c, f.url+"/dead/requeue", url.Values{"queue": {"orders"}, "id": {id}, "csrf": {other}, "token": {webToken}}); code != http.StatusForbidden {
			t.Errorf("foreign csrf: status %d, want 403", code)
		}
		code, _ := post(t, c, f.url+"/dead/requeue", url.Values{"queue": {"orders"}, "id": {id}, "csrf": {csrf}, "token": {webToken}})
		if code != http.StatusSeeOther || delaytest.DeadIDs(t, f.q)[id] {
			t.Fatalf("requeue with csrf and token: status %d, still dead %v", code, delaytest.DeadIDs(t, f.q)[id])
		}
		tasks, err := tasksOf(t.Context(), f.q, "order-1")
		if err != nil || len(tasks) != 1 || tasks[0].State != delay.StateDue {
			t.Errorf("requeued task: %+v, %v; want one pending", tasks, err)
		}
		// Logged in, the cookie stands for the token.
		if code, _ := post(t, c, f.url+"/login", url.Values{"csrf": {csrf}, "token": {webToken}}); code != http.StatusSeeOther {
			t.Fatalf("login: status %d", code)
		}
		// Under the login the page's token is the session's: the
		// pre-session one no longer stands for the login.
		if code, _ = post(t, c, f.url+"/dead/requeue-all", url.Values{"queue": {"orders"}, "csrf": {csrf}, "confirm": {"orders"}}); code != http.StatusForbidden {
			t.Errorf("requeue all with the pre-session csrf under the login: status %d, want 403", code)
		}
		csrf = csrfOf(t, c, f.url+"/dead?queue=orders")
		code, _ = post(t, c, f.url+"/dead/requeue-all", url.Values{"queue": {"orders"}, "csrf": {csrf}, "confirm": {"orders"}})
		if code != http.StatusSeeOther || len(delaytest.DeadIDs(t, f.q)) != 0 {
			t.Errorf("requeue all when logged in: status %d, %d still dead", code, len(delaytest.DeadIDs(t, f.q)))
		}
	})
}

// TestWebPurgeNeedsConfirmation: purge shows a confirmation page and runs
// only when the POST repeats the queue's name.
func TestWebPurgeNeedsConfirmation(t *testing.T) {
	t.Parallel()
	eachConsole(t, true, func(t *testing.T, f *consoleFixture) {
		c := browser(t)
		code, body := get(t, c, f.url+"/dead/purge?queue=orders")
		if code != http.StatusOK || !strings.Contains(body, "Purge all <strong>2</strong> dead letters") {
			t.Fatalf("confirmation page: %d\n%s", code, body)
		}
		csrf := csrfRe.FindStringSubmatch(body)[1]
		form := url.Values{"queue": {"orders"}, "csrf": {csrf}, "token": {webToken}}
		if code, _ := post(t, c, f.url+"/dead/purge", form); code != http.StatusBadRequest || len(delaytest.DeadIDs(t, f.q)) != 2 {
			t.Fatalf("purge without confirm: status %d, %d dead left", code, len(delaytest.DeadIDs(t, f.q)))
		}
		form.Set("confirm", "other")
		if code, _ := post(t, c, f.url+"/dead/purge", form); code != http.StatusBadRequest || len(delaytest.DeadIDs(t, f.q)) != 2 {
			t.Fatalf("purge with the wrong name: status %d, %d dead left", code, len(delaytest.DeadIDs(t, f.q)))
		}
		form.Set("confirm", "orders")
		form.Set("id", f.deadID[0])
		if code, _ := post(t, c, f.url+"/dead/purge", form); code != http.StatusSeeOther || len(delaytest.DeadIDs(t, f.q)) != 1 {
			t.Fatalf("purge one: status %d, %d dead left", code, len(delaytest.DeadIDs(t, f.q)))
		}
		form.Del("id")
		if code, _ := post(t, c, f.url+"/dead/purge", form); code != http.StatusSeeOther || len(delaytest.DeadIDs(t, f.q)) != 0 {
			t.Fatalf("purge all: status %d, %d dead left", code, len(delaytest.DeadIDs(t, f.q)))
		}
	})
}

// TestWebAccess: on loopback a foreign Host header is refused (DNS
// rebinding); off loopback every page but the login needs the login cookie.
func TestWebAccess(t *testing.T) {
	t.Parallel()
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
		f := seedConsole(t, b, true)
		req, _ := http.NewRequest(http.MethodGet, f.url+"/queues", nil)
		req.Host = "attacker.example:8080"
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("foreign Host: status %d, want 403", res.StatusCode)
		}
		if got := res.Header.Get("Content-Security-Policy"); !strings.Contains(got, "default-src 'none'") {
			t.Errorf("CSP %q", got)
		}
		// Under no-referrer a browser's own form POSTs carry "Origin:
		// null", which the origin check refuses: no login would work.
		if got := res.Header.Get("Referrer-Policy"); got != "same-origin" {
			t.Errorf("Referrer-Policy %q, want same-origin", got)
		}

		open := seedConsole(t, b, false)
		c := browser(t)
		for _, page := range []string{"/queues", "/dead", "/promotions", "/promotion?id=spend-more"} {
			if code, _ := get(t, c, open.url+page); code != http.StatusSeeOther {
				t.Errorf("off loopback, %s without login: status %d, want 303 to /login", page, code)
			}
		}
		csrf := csrfOf(t, c, open.url+"/login")
		if code, _ := post(t, c, open.url+"/login", url.Values{"csrf": {csrf}, "token": {"wrong"}}); code != http.StatusForbidden {
			t.Errorf("wrong token login: %d", code)
		}
		if code, _ := post(t, c, open.url+"/login", url.Values{"csrf": {csrf}, "token": {webToken}, "next": {"//evil.example/"}}); code != http.StatusSeeOther {
			t.Fatalf("login: %d", code)
		}
		if code, _ := get(t, c, open.url+"/queues"); code != http.StatusOK {
			t.Errorf("after login: status %d", code)
		}
		if safeNext("//evil.example/") != "/" || safeNext("/dead?queue=x") != "/dead?queue=x" {
			t.Error("safeNext lets an off-site redirect through")
		}
	})
}

var statRe = regexp.MustCompile(`data-stat="([a-z-]+)">(?:<a [^>]*>)?([0-9a-zµ.]+)`)

// pageStats returns the queues page's counters by their data-stat name.
func pageStats(body string) map[string]string {
	got := map[string]string{}
	for _, m := range statRe.FindAllStringSubmatch(body, -1) {
		got[m[1]] = m[2]
	}
	return got
}

// TestWebQueuesPageEqualsStats: the numbers on the Queues page are the
// queue's Stats and Browse.
func TestWebQueuesPageEqualsStats(t *testing.T) {
	eachConsole(t, true, func(t *testing.T, f *consoleFixture) {
		_, body := get(t, browser(t), f.url+"/queues")
		st, err := f.q.Stats(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got := pageStats(body)
		want := map[string]int64{"ready": st.Ready, "due-soon": 2, "pending": st.Pending, "inflight": st.InFlight,
			"dead": st.Dead, "delivered": st.Delivered, "dead-lettered": st.DeadLettered, "acked": st.Acked}
		if st.Pending != 3 || st.InFlight != 1 || st.Dead != 2 {
			t.Fatalf("fixture Stats %+v", st)
		}
		for k, v := range want {
			if got[k] != strconv.FormatInt(v, 10) {
				t.Errorf("%s: page %q, Stats %d", k, got[k], v)
			}
		}
		if !strings.Contains(body, "order-3") || !strings.Contains(body, "order-2") { // due soonest, in flight
			t.Errorf("the oldest due or in-flight task is missing")
		}
		if n := strings.Count(body, "<rect "); n < 12 {
			t.Errorf("lateness chart has %d bars, want ≥ 12", n)
		}
		if strings.Contains(body, `id="losses-`) || got["lost"] != "0" || got["restored"] != "0" {
			t.Errorf("a queue that lost nothing shows losses: lost %q restored %q", got["lost"], got["restored"])
		}
	})
}

// TestWebQueuesShowLosses: a queue key lost behind the queue's back (here
// its due entry, found when the task is enqueued again) shows on the
// queues page as a warning and in the counters, equal to Stats.
func TestWebQueuesShowLosses(t *testing.T) {
	t.Parallel()
	eachConsole(t, true, func(t *testing.T, f *consoleFixture) {
		ctx := t.Context()
		info, err := tasksOf(ctx, f.q, "order-3")
		if err != nil || len(info) != 1 {
			t.Fatalf("lookup: %+v %v", info, err)
		}
		due := f.b.Prefix + ":{q:orders}:due" // the key layout of docs/cluster.md
		if n, err := f.b.Client.ZRem(ctx, due, info[0].ID).Result(); err != nil || n != 1 {
			t.Fatalf("removing the due entry: %d %v", n, err)
		}
		e, err := f.q.Enqueue(ctx, delay.Job{Key: "order-3", Token: info[0].Token, When: delay.At(info[0].When)})
		if err != nil || !e.Restored {
			t.Fatalf("re-enqueue after the loss: %+v %v, want Restored", e, err)
		}
		_, body := get(t, browser(t), f.url+"/queues")
		st, err := f.q.Stats(ctx)
		if err != nil || st.Restored != 1 {
			t.Fatalf("Stats %+v %v, want one restored", st, err)
		}
		got := pageStats(body)
		if got["restored"] != "1" || got["lost"] != strconv.FormatInt(st.Lost, 10) {
			t.Errorf("counters: restored %q lost %q, Stats %+v", got["restored"], got["lost"], st)
		}
		if !strings.Contains(body, `id="losses-`) || !strings.Contains(body, "1 due entries restored") {
			t.Errorf("no loss warning on the queues page")
		}
	})
}

var simRe = regexp.MustCompile(`id="sim-tier">([^<]*)<`)

// TestWebSimulatorEqualsMatch: the simulator answers what Cache.Match does.
func TestWebSimulatorEqualsMatch(t *testing.T) {
	t.Parallel()
	eachConsole(t, true, func(t *testing.T, f *consoleFixture) {
		c := browser(t)
		for _, tc := range []struct {
			id    string
			value string
		}{{"spend-more", "99.99"}, {"spend-more", "100"}, {"spend-more", "199.98"}, {"spend-more", "250.5"}, {xssName, "2"}, {xssName, "4"}, {xssName, "7"}} {
			v := decimal.RequireFromString(tc.value)
			metric := gradient.Quantity
			if tc.id == "spend-more" {
				metric = gradient.Amount
			}
			res, err := f.c.Match(t.Context(), cache.Query{Promotion: tc.id, Metric: metric, Value: v}, cache.MatchOptions{})
			want := "none reached"
			if err == nil {
				want = res.Tier.ID + " (threshold "
			} else if !errors.Is(err, cache.ErrNoTier) {
				t.Fatal(err)
			}
			_, body := get(t, c, f.url+"/promotion?id="+url.QueryEscape(tc.id)+"&value="+tc.value+"&base=300")
			m := simRe.FindStringSubmatch(body)
			if m == nil || !strings.HasPrefix(html.UnescapeString(m[1]), want) {
				t.Errorf("%s at %s: simulator %v, Match %q", tc.id, tc.value, m, want)
			}
		}
		_, body := get(t, c, f.url+"/promotion?id=spend-more&value=abc")
		if !strings.Contains(body, `id="sim-error"`) {
			t.Errorf("a bad value shows no error")
		}
	})
}

// TestWebLookupAndRefresh: the key lookup lists a key's tasks with their
// state and escaped error; ?refresh=N reloads the Queues page every N s.
func TestWebLookupAndRefresh(t *testing.T) {
	t.Parallel()
	eachConsole(t, true, func(t *testing.T, f *consoleFixture) {
		c := browser(t)
		code, body := get(t, c, f.url+"/lookup?queue=orders&key=order-0")
		if code != http.StatusOK || !strings.Contains(body, `data-count="1"`) || !strings.Contains(body, "<td>dead</td>") ||
			!strings.Contains(body, "&lt;script&gt;") || strings.Contains(body, "<script") {
			t.Errorf("lookup of order-0: %d\n%s", code, body)
		}
		if code, _ := get(t, c, f.url+"/lookup?queue=orders&key="); code != http.StatusBadRequest {
			t.Errorf("lookup of an empty key: status %d, want 400", code)
		}
		if code, _ := get(t, c, f.url+"/lookup?queue=nope&key=k"); code != http.StatusNotFound {
			t.Errorf("lookup in an unknown queue: status %d, want 404", code)
		}
		_, body = get(t, c, f.url+"/queues?refresh=5")
		if !strings.Contains(body, `<meta http-equiv="refresh" content="5">`) {
			t.Errorf("no refresh meta for ?refresh=5")
		}
		if _, body = get(t, c, f.url+"/queues"); strings.Contains(body, `http-equiv="refresh"`) {
			t.Errorf("refresh meta without ?refresh")
		}
	})
}

// tasksOf lists the tasks of a business key (delay.Queue.List by Key).
func tasksOf(ctx context.Context, q *delay.Queue, key string) ([]delay.TaskInfo, error) {
	p, err := q.List(ctx, delay.ListOptions{Key: key})
	return p.Tasks, err
}
