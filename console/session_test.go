package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

// fakeClock is a console's Options.Now that a test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// logIn logs browser c in through the login form and returns the login
// cookie's value and the session's CSRF token (from a page under it).
func logIn(t *testing.T, c *http.Client, base string) (cookie, csrf string) {
	t.Helper()
	pre := csrfOf(t, c, base+"/login")
	if code, body := post(t, c, base+"/login", url.Values{"csrf": {pre}, "token": {webToken}}); code != http.StatusSeeOther {
		t.Fatalf("login: status %d: %s", code, body)
	}
	u, _ := url.Parse(base)
	for _, ck := range c.Jar.Cookies(u) {
		if isCookie(ck, authCookie) {
			cookie = ck.Value
		}
	}
	if cookie == "" {
		t.Fatal("the login set no login cookie")
	}
	return cookie, csrfOf(t, c, base+"/queue?name=orders")
}

// replay sends what a holder of an old login cookie would: a page read
// and a pause of the queue; it returns both statuses and where the pause
// was sent.
func replay(t *testing.T, f *consoleFixture, cookie, csrf string) (read, pause int, pauseTo string) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	hdr := http.Header{"Cookie": {authCookie + "=" + cookie}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, f.url+"/queues", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = hdr.Clone()
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	act := postRaw(t, c, f.url+"/act", url.Values{"queue": {"orders"}, "action": {"pause"}, "confirm": {"yes"}, "csrf": {csrf}}, hdr)
	return res.StatusCode, act.StatusCode, act.Header.Get("Location")
}

// TestWebSessionEnds: a login ends on the server at logout, at its
// absolute expiry, after its idle time and when the console's token
// changes: the old cookie then neither reads a page nor pauses a queue,
// and the session's key is gone.
func TestWebSessionEnds(t *testing.T) {
	t.Parallel()
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
		for _, tc := range []struct {
			name string
			// steps move the clock, each followed by a read that must still pass
			steps []time.Duration
			end   func(t *testing.T, f *consoleFixture, clk *fakeClock, c *http.Client, csrf string)
		}{
			{"logout", nil, func(t *testing.T, f *consoleFixture, _ *fakeClock, c *http.Client, csrf string) {
				if code, _ := post(t, c, f.url+"/logout", url.Values{"csrf": {csrf}}); code != http.StatusSeeOther {
					t.Fatalf("logout: status %d", code)
				}
			}},
			// Session 1h: used every 25 min it is never idle, and still ends at 1h.
			{"absolute", []time.Duration{25 * time.Minute, 25 * time.Minute}, func(t *testing.T, _ *consoleFixture, clk *fakeClock, _ *http.Client, _ string) {
				clk.Add(11 * time.Minute)
			}},
			{"25h later", nil, func(t *testing.T, _ *consoleFixture, clk *fakeClock, _ *http.Client, _ string) {
				clk.Add(25 * time.Hour)
			}},
			// Idle 30m: a use every 29 min keeps it; 31 min without one ends it.
			{"idle", []time.Duration{29 * time.Minute, 29 * time.Minute}, func(t *testing.T, _ *consoleFixture, clk *fakeClock, _ *http.Client, _ string) {
				clk.Add(31 * time.Minute)
			}},
			// The console restarted with another token (the old one leaked):
			// a login made with the old token is no login.
			{"token changed", nil, func(t *testing.T, f *consoleFixture, clk *fakeClock, _ *http.Client, _ string) {
				g, err := New(t.Context(), Options{Client: f.b.Client, Token: webToken + "-new", QueuePrefix: f.b.Prefix,
					CachePrefix: f.b.Prefix, Now: clk.Now})
				if err != nil {
					t.Fatal(err)
				}
				hs := httptest.NewServer(g)
				t.Cleanup(hs.Close)
				f.url = hs.URL
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				clk := newFakeClock()
				f := seedConsoleWith(t, b, false, func(o *Options) { o.Now, o.Session, o.SessionIdle = clk.Now, time.Hour, 30*time.Minute })
				c := browser(t)
				cookie, csrf := logIn(t, c, f.url)
				for i, d := range tc.steps {
					clk.Add(d)
					if read, _, _ := replay(t, f, cookie, "no-csrf"); read != http.StatusOK {
						t.Fatalf("step %d (+%v): read with the login cookie: %d, want 200", i, d, read)
					}
				}
				tc.end(t, f, clk, c, csrf)
				read, pause, to := replay(t, f, cookie, csrf)
				if read != http.StatusSeeOther || pause != http.StatusSeeOther || !strings.HasPrefix(to, "/login?") {
					t.Errorf("old login cookie: read %d, pause %d to %q; want both sent to the login", read, pause, to)
				}
				if st, err := f.q.Stats(t.Context()); err != nil || st.Paused {
					t.Errorf("the old cookie paused the queue (%v)", err)
				}
				keys, err := testredis.Keys(t.Context(), b.Client, b.Prefix+":console:session:")
				if err != nil || len(keys) != 0 {
					t.Errorf("session keys left: %v, %v", keys, err)
				}
			})
		}
	})
}

// TestWebCSRFBoundToSession: a CSRF cookie and token taken from an
// anonymous login page and planted beside the operator's login cookie do
// not make a change, with or without a foreign Origin; nor does the
// session's own token from another origin or site. From the console's
// own origin, the session's token does.
func TestWebCSRFBoundToSession(t *testing.T) {
	t.Parallel()
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
		f := seedConsole(t, b, false)
		op := browser(t)
		cookie, sessCSRF := logIn(t, op, f.url)
		preCSRF, preCk := csrfOfHeader(t, browser(t), f.url+"/login", nil)
		planted := authCookie + "=" + cookie + "; " + preCk.Name + "=" + preCk.Value
		own := authCookie + "=" + cookie
		for _, tc := range []struct {
			name, cookie, csrf string
			hdr                map[string]string
			want               int
		}{
			{"planted pair, sibling origin", planted, preCSRF, map[string]string{"Origin": "https://evil.corp.example"}, http.StatusForbidden},
			{"planted pair, no origin", planted, preCSRF, nil, http.StatusForbidden},
			{"session token, sibling origin", own, sessCSRF, map[string]string{"Origin": "https://evil.corp.example"}, http.StatusForbidden},
			{"session token, same-site fetch", own, sessCSRF, map[string]string{"Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
			{"session token, null origin", own, sessCSRF, map[string]string{"Origin": "null"}, http.StatusForbidden},
			{"session token, own origin", own, sessCSRF, map[string]string{"Origin": f.url, "Sec-Fetch-Site": "same-origin"}, http.StatusSeeOther},
		} {
			hdr := http.Header{"Cookie": {tc.cookie}}
			for k, v := range tc.hdr {
				hdr.Set(k, v)
			}
			res := postRaw(t, browser(t), f.url+"/act", url.Values{"queue": {"orders"}, "action": {"pause"}, "confirm": {"yes"}, "csrf": {tc.csrf}}, hdr)
			st, err := f.q.Stats(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != tc.want || st.Paused != (tc.want == http.StatusSeeOther) {
				t.Errorf("%s: status %d, paused %v; want %d", tc.name, res.StatusCode, st.Paused, tc.want)
			}
		}
		// Logged in, the login form carries the session's token; a new
		// login replaces the session, and the old cookie is worthless.
		if again := csrfOf(t, op, f.url+"/login"); again != sessCSRF {
			t.Errorf("the login form under a login carries %q, not the session's token", again)
		}
		if newCookie, _ := logIn(t, op, f.url); newCookie == cookie {
			t.Error("a new login kept the old session ID")
		}
		if read, _, _ := replay(t, f, cookie, sessCSRF); read != http.StatusSeeOther {
			t.Errorf("the replaced session's cookie still reads pages: %d", read)
		}
		// A login posted from another origin is refused too (login CSRF).
		c := browser(t)
		pre := csrfOf(t, c, f.url+"/login")
		res := postRaw(t, c, f.url+"/login", url.Values{"csrf": {pre}, "token": {webToken}}, http.Header{"Origin": {"https://evil.corp.example"}})
		if res.StatusCode != http.StatusForbidden || len(res.Cookies()) != 0 {
			t.Errorf("login from a foreign origin: status %d, cookies %v; want 403 and none", res.StatusCode, res.Cookies())
		}
	})
}

// TestWebLoginRateLimit: wrong tokens beyond the per-address limit, or
// beyond the global one from fresh addresses, are answered 429 with
// Retry-After and without a look at the token; a minute later the login
// works; successful logins are not counted; an IPv6 /64 is one address.
func TestWebLoginRateLimit(t *testing.T) {
	t.Parallel()
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
		for _, tc := range []struct {
			name            string
			perAddr, global int
			addr            func(i int) string // the client of the i-th attempt
		}{
			{"per address", 3, 100, func(i int) string { return "192.0.2.7:" + strconv.Itoa(4000+i) }},
			{"global", 100, 3, func(i int) string { return "198.51.100." + strconv.Itoa(i%200) + ":4000" }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				clk := newFakeClock()
				f := seedConsoleWith(t, b, false, func(o *Options) {
					o.Now, o.LoginsPerAddress, o.LoginsPerMinute = clk.Now, tc.perAddr, tc.global
				})
				pre, preCk := directCSRF(t, f)
				try := func(addr, token string) *http.Response {
					req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/login",
						strings.NewReader(url.Values{"csrf": {pre}, "token": {token}}.Encode()))
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
					req.AddCookie(preCk)
					req.RemoteAddr = addr
					rec := httptest.NewRecorder()
					f.srv.ServeHTTP(rec, req)
					return rec.Result()
				}
				for i := range 3 {
					if res := try(tc.addr(i), "guess"); res.StatusCode != http.StatusForbidden {
						t.Fatalf("wrong token %d: status %d, want 403", i, res.StatusCode)
					}
				}
				for _, token := range []string{"guess", webToken} {
					res := try(tc.addr(3), token)
					ra, err := strconv.Atoi(res.Header.Get("Retry-After"))
					if res.StatusCode != http.StatusTooManyRequests || err != nil || ra < 1 || ra > 60 {
						t.Errorf("attempt past the limit with %q: status %d, Retry-After %q; want 429, 1..60", token, res.StatusCode, res.Header.Get("Retry-After"))
					}
				}
				if tc.name == "per address" {
					// another address is not limited, and an IPv6 /64 is one address
					if res := try("192.0.2.8:4000", webToken); res.StatusCode != http.StatusSeeOther {
						t.Errorf("another address: status %d, want 303", res.StatusCode)
					}
					for i := range 3 {
						try("[2001:db8::"+strconv.Itoa(i+1)+"]:1", "guess")
					}
					if res := try("[2001:db8::99]:1", webToken); res.StatusCode != http.StatusTooManyRequests {
						t.Errorf("another address of the same /64: status %d, want 429", res.StatusCode)
					}
				}
				clk.Add(time.Minute)
				for i := range 5 { // successful logins are not counted
					if res := try(tc.addr(3), webToken); res.StatusCode != http.StatusSeeOther {
						t.Fatalf("login %d a minute later: status %d, want 303", i, res.StatusCode)
					}
				}
			})
		}
	})
}

// directCSRF reads the login page through the handler itself and returns
// its pre-session CSRF token and cookie.
func directCSRF(t *testing.T, f *consoleFixture) (string, *http.Cookie) {
	t.Helper()
	rec := httptest.NewRecorder()
	f.srv.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/login", nil))
	m := csrfRe.FindStringSubmatch(rec.Body.String())
	for _, ck := range rec.Result().Cookies() {
		if m != nil && ck.Name == csrfCookie {
			return m[1], ck
		}
	}
	t.Fatalf("login page: %d, no csrf pair", rec.Code)
	return "", nil
}

// TestWebTokenFieldRateLimit: on loopback a change may carry the
// console's token in a form field instead of a login; each such change is
// a guess of the token and counts against the login limits. Past the
// per-address limit (whether the wrong guesses came through the login
// form or through changes) a change with the right token is answered 429
// and changes nothing; a minute later it works, and changes made with the
// right token are not counted.
func TestWebTokenFieldRateLimit(t *testing.T) {
	t.Parallel()
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
		for _, guessAt := range []string{"/act", "/login"} {
			t.Run("guesses at "+guessAt, func(t *testing.T) {
				clk := newFakeClock()
				f := seedConsoleWith(t, b, true, func(o *Options) { o.Now, o.LoginsPerAddress = clk.Now, 3 })
				send := func(method, path string, form url.Values, ck *http.Cookie) *http.Response {
					t.Helper()
					var body io.Reader
					if form != nil {
						body = strings.NewReader(form.Encode())
					}
					req := httptest.NewRequestWithContext(t.Context(), method, path, body)
					req.Host, req.RemoteAddr = "127.0.0.1:8080", "127.0.0.1:4000"
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
					if ck != nil {
						req.AddCookie(ck)
					}
					rec := httptest.NewRecorder()
					f.srv.ServeHTTP(rec, req)
					return rec.Result()
				}
				login := send(http.MethodGet, "/login", nil, nil)
				page, _ := io.ReadAll(login.Body)
				m := csrfRe.FindSubmatch(page)
				var preCk *http.Cookie
				for _, ck := range login.Cookies() {
					if ck.Name == csrfCookie {
						preCk = ck
					}
				}
				if m == nil || preCk == nil {
					t.Fatalf("login page: %d, no csrf pair", login.StatusCode)
				}
				pause := func(token string) *http.Response {
					return send(http.MethodPost, "/act", url.Values{"queue": {"orders"}, "action": {"pause"}, "confirm": {"yes"},
						"csrf": {string(m[1])}, "token": {token}}, preCk)
				}
				paused := func() bool {
					st, err := f.q.Stats(t.Context())
					if err != nil {
						t.Fatal(err)
					}
					return st.Paused
				}
				for i := range 3 {
					var res *http.Response
					if guessAt == "/act" {
						res = pause("guess")
					} else {
						res = send(http.MethodPost, "/login", url.Values{"csrf": {string(m[1])}, "token": {"guess"}}, preCk)
					}
					if res.StatusCode != http.StatusForbidden {
						t.Fatalf("wrong token %d at %s: status %d, want 403", i, guessAt, res.StatusCode)
					}
				}
				res := pause(webToken)
				if ra := res.Header.Get("Retry-After"); res.StatusCode != http.StatusTooManyRequests || ra == "" || paused() {
					t.Errorf("pause with the right token past the limit: status %d, Retry-After %q, paused %v; want 429, nothing changed", res.StatusCode, ra, paused())
				}
				clk.Add(time.Minute)
				for i := range 5 {
					if res := pause(webToken); res.StatusCode != http.StatusSeeOther || !paused() {
						t.Fatalf("pause %d with the right token a minute later: status %d, paused %v; want 303, paused", i, res.StatusCode, paused())
					}
				}
				if err := f.q.Resume(t.Context()); err != nil { // the next subtest seeds this queue again
					t.Fatal(err)
				}
			})
		}
	})
}
