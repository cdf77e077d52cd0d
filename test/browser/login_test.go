package browser

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserLoginRedirect logs in through the console's form with a
// hostile next value put in the form (as a page that links to the login
// could) and lets Chromium follow the redirect: every one must land on
// the console, not on evil.example. Chromium resolves no name but
// 127.0.0.1 (newBrowser), so a redirect off-site ends on an error page
// at once instead of waiting on DNS.
func TestBrowserLoginRedirect(t *testing.T) {
	f := seed(t)
	ctx := newBrowser(t)
	base := startConsole(t, f)
	for _, next := range []string{
		"\t//evil.example/",
		"/\t/evil.example/",
		"/%09/evil.example/",
		"/\\/evil.example/",
		"\\/\\/evil.example/",
		"/%2F%2Fevil.example/",
		"https:evil.example",
		"https://evil.example/",
		"//@evil.example",
		"//user:pass@evil.example/",
		"/\r\n/evil.example/",
		"/.//evil.example/",
		"javascript:alert(1)",
	} {
		// The GET form renders next itself; the POST is then given the raw
		// value, so both the rendered and the posted paths are exercised.
		for _, via := range []string{"query", "form"} {
			login := base + "/login"
			if via == "query" {
				login += "?next=" + url.QueryEscape(next)
			}
			steps := []chromedp.Action[chromedp.Void]{chromedp.Navigate(login), chromedp.WaitVisible(css(`#token`))}
			if via == "form" {
				steps = append(steps, chromedp.SetAttributeValue(css(`input[name="next"]`), "value", next))
			}
			steps = append(steps, chromedp.SendKeys(css(`#token`), token), chromedp.Click(css(`#login-submit`)))
			do(t, ctx, "log in with next "+via, steps...)
			landed, ok := waitLeave(t, ctx, base+"/login")
			if ok && !strings.HasPrefix(landed, base+"/") {
				t.Errorf("next %q via %s: Chromium landed on %q, off the console %s", next, via, landed, base)
			}
		}
	}
	// The login cookie is HttpOnly (its Max-Age and Secure are checked in
	// cmd/tierset TestWebLoginRedirect).
	cookies := get(t, ctx, "cookie expiry", chromedp.Evaluate[string](`document.cookie`))
	if strings.Contains(cookies, "tierset_auth") {
		t.Errorf("the login cookie is readable by scripts: %q", cookies)
	}
}

// waitLeave polls the tab's location until it is no longer from (the
// form's POST answered and its redirect was followed); deadline 10 s,
// after which the test fails and ok is false. A redirect off-site never
// commits (its name does not resolve), so the tab then stays on the
// login page: that fails the test as landing elsewhere would.
func waitLeave(t *testing.T, ctx context.Context, from string) (loc string, ok bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		loc, err := chromedp.Run(ctx, chromedp.Location())
		if err == nil && !strings.HasPrefix(loc, from) {
			return loc, true
		}
		if time.Now().After(deadline) {
			t.Errorf("still on %q 10 s after the login was submitted (last error %v)", loc, err)
			return loc, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
