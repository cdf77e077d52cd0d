package console

import (
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

// hostileNext are redirect targets a browser (WHATWG URL parsing) would
// take off-site if they were sent as they are, each as the form value the
// login receives (already percent-decoded once by the form encoding).
var hostileNext = []string{
	"\t//evil.example/",
	"/\t/evil.example/",
	"/%09/evil.example/",
	"/\\/evil.example/",
	"\\/\\/evil.example/",
	"\\\\evil.example/",
	"/%2F%2Fevil.example/",
	"/%5C%5Cevil.example/",
	"https:evil.example",
	"https://evil.example/",
	"https:/evil.example/",
	"//@evil.example",
	"/@evil.example",
	"//user:pass@evil.example/",
	"http://user@127.0.0.1@evil.example/",
	"/\r\n/evil.example/",
	"\r\n//evil.example/",
	"/\n\\evil.example/",
	" //evil.example/",
	"\x00//evil.example/",
	"/.//evil.example/",
	"/..//evil.example/",
	"/x/../..//evil.example/",
	"javascript:alert(1)",
	"//evil.example/",
	"/\x7f/evil.example/",
	"",
}

var nextFieldRe = regexp.MustCompile(`name="next" value="([^"]*)"`)

// browserResolve resolves a Location value against base as a browser
// does (tabs and newlines dropped, outer controls and spaces trimmed,
// backslash as slash) and returns the origin it lands on.
func browserResolve(t *testing.T, base, loc string) string {
	t.Helper()
	s := strings.Map(func(r rune) rune {
		switch r {
		case '\t', '\n', '\r':
			return -1
		case '\\':
			return '/'
		}
		return r
	}, loc)
	s = strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
	b, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u, err := b.Parse(s)
	if err != nil {
		t.Fatalf("Location %q does not parse: %v", loc, err)
	}
	return u.Scheme + "://" + u.Host
}

func TestSafeNext(t *testing.T) {
	t.Parallel()
	const base = "http://console.example:8080/login"
	for _, next := range hostileNext {
		got := safeNext(next)
		if !strings.HasPrefix(got, "/") || strings.HasPrefix(got, "//") || strings.ContainsAny(got, "\\\t\r\n\x00 ") {
			t.Errorf("safeNext(%q) = %q: not a plain path", next, got)
		}
		if o := browserResolve(t, base, got); o != "http://console.example:8080" {
			t.Errorf("safeNext(%q) = %q resolves to %s", next, got, o)
		}
	}
	// Same-origin targets keep their path and query.
	for next, want := range map[string]string{
		"/dead?queue=x":           "/dead?queue=x",
		"/queues":                 "/queues",
		"/promotion?id=a%20b":     "/promotion?id=a%20b",
		"/%2F%2Fevil.example/":    "/%2F%2Fevil.example/",
		"/a/./b/../c?x=<y>":       "/a/c?x=%3Cy%3E",
		"/\t/evil.example/":       "/",
		"/dead?queue=x#fragment":  "/dead?queue=x",
		"/dead?next=//evil":       "/dead?next=//evil",
		"\t/queues\n":             "/queues",
		"/queues?q=\u00e9":        "/queues?q=%C3%A9",
		"/dead?queue=x\\y":        "/dead?queue=x/y",
		"/.//evil.example/x?y=1 ": "/evil.example/x?y=1",
	} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}

// TestWebLoginRedirect logs in with every hostile next: the Location the
// console answers lands on the console, and the login cookie expires and
// is Secure exactly when the browser came over TLS.
func TestWebLoginRedirect(t *testing.T) {
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
		f := seedConsole(t, b, false)
		for _, next := range hostileNext {
			c := browser(t)
			csrf := csrfOf(t, c, f.url+"/login")
			res := postRaw(t, c, f.url+"/login", url.Values{"csrf": {csrf}, "token": {webToken}, "next": {next}}, nil)
			if res.StatusCode != http.StatusSeeOther {
				t.Fatalf("login with next %q: status %d", next, res.StatusCode)
			}
			loc := res.Header.Get("Location")
			if o := browserResolve(t, f.url+"/login", loc); o != f.url {
				t.Errorf("next %q: Location %q lands on %s, not %s", next, loc, o, f.url)
			}
			// The GET form carries next too: what it renders is already safe.
			_, body := get(t, c, f.url+"/login?next="+url.QueryEscape(next))
			m := nextFieldRe.FindStringSubmatch(body)
			if m == nil {
				t.Fatalf("login form for next %q has no next field", next)
			}
			if v := html.UnescapeString(m[1]); browserResolve(t, f.url+"/login", v) != f.url || strings.HasPrefix(v, "//") {
				t.Errorf("login form for next %q carries %q", next, v)
			}
		}

		// cookie logs in without a jar (a Secure cookie set over plain
		// HTTP would never be sent back by one), headers hdr on both requests.
		cookie := func(t *testing.T, srvURL string, client *http.Client, hdr http.Header) *http.Cookie {
			t.Helper()
			csrf, csrfCk := csrfOfHeader(t, client, srvURL+"/login", hdr)
			h := hdr.Clone()
			if h == nil {
				h = http.Header{}
			}
			h.Set("Cookie", csrfCk.String())
			res := postRaw(t, client, srvURL+"/login", url.Values{"csrf": {csrf}, "token": {webToken}, "next": {"/queues"}}, h)
			if res.StatusCode != http.StatusSeeOther {
				t.Fatalf("login: status %d", res.StatusCode)
			}
			for _, ck := range res.Cookies() {
				if isCookie(ck, authCookie) {
					if csrfCk.Secure != ck.Secure || csrfCk.Name != "__Host-"+csrfCookie && ck.Secure {
						t.Errorf("csrf cookie %s Secure %v, login cookie Secure %v", csrfCk.Name, csrfCk.Secure, ck.Secure)
					}
					// Over TLS both are __Host- cookies: Secure, Path=/, no Domain.
					if ck.Secure != strings.HasPrefix(ck.Name, "__Host-") || ck.Path != "/" || ck.Domain != "" {
						t.Errorf("login cookie %s: Secure %v, Path %q, Domain %q; want __Host- exactly when Secure, Path /, no Domain", ck.Name, ck.Secure, ck.Path, ck.Domain)
					}
					return ck
				}
			}
			t.Fatalf("login set no %s cookie", authCookie)
			return nil
		}
		noJar := func() *http.Client {
			return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		}
		t.Run("plain http", func(t *testing.T) {
			ck := cookie(t, f.url, noJar(), nil)
			if ck.MaxAge != int((12*time.Hour)/time.Second) || ck.Secure || !ck.HttpOnly {
				t.Errorf("cookie %+v: want Max-Age 12h, not Secure, HttpOnly", ck)
			}
		})
		t.Run("forwarded https, proxy not declared", func(t *testing.T) {
			ck := cookie(t, f.url, noJar(), http.Header{"X-Forwarded-Proto": {"https"}})
			if ck.Secure {
				t.Error("an undeclared proxy's header made the cookie Secure")
			}
		})
		t.Run("forwarded https, -trust-proxy", func(t *testing.T) {
			g := seedConsoleWith(t, b, false, func(c *Options) { c.TrustProxy = true; c.Session = time.Hour })
			ck := cookie(t, g.url, noJar(), http.Header{"X-Forwarded-Proto": {"https"}})
			if !ck.Secure || ck.MaxAge != 3600 {
				t.Errorf("cookie %+v: want Secure, Max-Age 3600", ck)
			}
			ck = cookie(t, g.url, noJar(), http.Header{"X-Forwarded-Proto": {"http"}})
			if ck.Secure {
				t.Error("forwarded http made the cookie Secure")
			}
		})
		t.Run("direct TLS", func(t *testing.T) {
			hs := httptest.NewTLSServer(f.srv)
			t.Cleanup(hs.Close)
			c := hs.Client()
			c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			ck := cookie(t, hs.URL, c, nil)
			if !ck.Secure {
				t.Errorf("cookie over TLS %+v: not Secure", ck)
			}
		})
	})
}

// postRaw posts form with the extra headers hdr and returns the answer
// (its body read and closed).
func postRaw(t *testing.T, c *http.Client, u string, form url.Values, hdr http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

// csrfOfHeader GETs the login form with headers hdr and returns its CSRF
// token and the csrf cookie that goes with it.
func csrfOfHeader(t *testing.T, c *http.Client, u string, hdr http.Header) (string, *http.Cookie) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	m := csrfRe.FindStringSubmatch(string(body))
	if res.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("GET %s: %d, no csrf token", u, res.StatusCode)
	}
	for _, ck := range res.Cookies() {
		if isCookie(ck, csrfCookie) {
			return m[1], ck
		}
	}
	t.Fatalf("GET %s set no csrf cookie", u)
	return "", nil
}

// isCookie reports whether ck is the console's cookie base, with or
// without the __Host- prefix it has over TLS.
func isCookie(ck *http.Cookie, base string) bool {
	return strings.TrimPrefix(ck.Name, "__Host-") == base
}
