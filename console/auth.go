package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// The console's safety rules, in one place:
//   - every change is a POST carrying the CSRF token of the browser's
//     csrf cookie, and the console's token (the login cookie, or a token
//     form field for scripts);
//   - on loopback the read-only pages are open, elsewhere they need the
//     login cookie too;
//   - on loopback the Host header must be a loopback name, so a page on
//     another site cannot reach the console through DNS rebinding.
const (
	csrfCookie = "tierset_csrf"
	authCookie = "tierset_auth"
)

func (s *Console) mac(parts ...string) string {
	m := hmac.New(sha256.New, s.secret)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return hex.EncodeToString(m.Sum(nil))
}

// csrfFor is the form token of a browser's csrf cookie value.
func (s *Console) csrfFor(cookie string) string { return s.mac("csrf", cookie) }

// authValue is the login cookie's value: it proves the token without holding it.
func (s *Console) authValue() string { return s.mac("auth", s.cfg.token) }

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// authed reports whether the request carries the login cookie.
func (s *Console) authed(r *http.Request) bool {
	c, err := r.Cookie(authCookie)
	return err == nil && equal(c.Value, s.authValue())
}

// csrfToken returns the form token for r, setting the csrf cookie first
// when the browser has none.
func (s *Console) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) == 32 {
		return s.csrfFor(c.Value)
	}
	v := randomHex(16)
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: v, Path: "/", HttpOnly: true, Secure: s.overTLS(r), SameSite: http.SameSiteStrictMode})
	r.AddCookie(&http.Cookie{Name: csrfCookie, Value: v}) // the rest of this request sees it
	return s.csrfFor(v)
}

// checkPost refuses a change that is not a POST with a valid CSRF token
// and the console's token; it writes the refusal and returns false.
func (s *Console) checkPost(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "changes are POST only", http.StatusMethodNotAllowed)
		return false
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return false
	}
	c, err := r.Cookie(csrfCookie)
	if err != nil || !equal(r.PostForm.Get("csrf"), s.csrfFor(c.Value)) {
		http.Error(w, "refused: missing or wrong CSRF token (reload the page and try again)", http.StatusForbidden)
		return false
	}
	if !s.authed(r) && !equal(r.PostForm.Get("token"), s.cfg.token) {
		http.Error(w, "refused: changes need the console's token (log in first)", http.StatusForbidden)
		return false
	}
	return true
}

// guard wraps every route: security headers, the Host check and, off
// loopback, the login for reads.
func (s *Console) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-store")
		if s.cfg.loopback {
			host := r.Host
			if hh, _, err := net.SplitHostPort(host); err == nil {
				host = hh
			}
			if !IsLoopback(strings.Trim(host, "[]")) {
				http.Error(w, "refused: the console answers loopback host names only", http.StatusForbidden)
				return
			}
		} else if !s.authed(r) && r.URL.Path != "/login" && r.URL.Path != "/style.css" {
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Console) login(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		s.render(w, r, "login.html", "Log in", map[string]string{"Next": safeNext(r.URL.Query().Get("next"))})
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	c, err := r.Cookie(csrfCookie)
	if err != nil || !equal(r.PostForm.Get("csrf"), s.csrfFor(c.Value)) {
		http.Error(w, "refused: missing or wrong CSRF token (reload the page and try again)", http.StatusForbidden)
		return
	}
	if !equal(r.PostForm.Get("token"), s.cfg.token) {
		http.Error(w, "wrong token", http.StatusForbidden)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: authCookie, Value: s.authValue(), Path: "/", MaxAge: int(s.cfg.session / time.Second),
		HttpOnly: true, Secure: s.overTLS(r), SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, safeNext(r.PostForm.Get("next")), http.StatusSeeOther)
}

func (s *Console) logout(w http.ResponseWriter, r *http.Request) {
	if !s.checkPost(w, r) {
		return
	}
	http.SetCookie(w, &http.Cookie{Name: authCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: s.overTLS(r), SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// overTLS reports whether the browser reached the console over TLS:
// directly, or through a proxy the operator declared with -trust-proxy
// whose X-Forwarded-Proto says https. The header is ignored otherwise, as
// any client can send it.
func (s *Console) overTLS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if !s.cfg.trustProxy {
		return false
	}
	// A chain of proxies appends: the first value is what the browser used.
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return strings.EqualFold(strings.TrimSpace(proto), "https")
}

// nextBase is the origin a redirect target is resolved against; only its
// equality with the result matters.
var nextBase = &url.URL{Scheme: "http", Host: "console.invalid", Path: "/"}

// safeNext keeps a redirect target on this site. It reads next as a
// browser's URL parser (WHATWG) would, since the browser is what follows
// the Location: tabs and newlines anywhere are dropped, leading and
// trailing C0 controls and spaces trimmed, and a backslash is a slash.
// What is left must be a path ("/..."), not "//host" or a scheme, and must
// resolve on this origin; the answer is its resolved path and query,
// re-encoded, never starting "//". Anything else is "/".
func safeNext(next string) string {
	s := strings.Map(func(r rune) rune {
		switch r {
		case '\t', '\n', '\r':
			return -1
		case '\\':
			return '/'
		}
		return r
	}, next)
	s = strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
	if !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") {
		return "/"
	}
	for _, r := range s {
		if r < ' ' || r == 0x7f {
			return "/"
		}
	}
	u, err := nextBase.Parse(s)
	if err != nil || u.Scheme != nextBase.Scheme || u.Host != nextBase.Host || u.User != nil || u.Opaque != "" {
		return "/"
	}
	// Dot segments resolve away ("/.//evil" is "//evil"): a path that now
	// starts with "//" would be read as a host, so it keeps one slash.
	out := "/" + strings.TrimLeft(u.EscapedPath(), "/")
	if u.RawQuery != "" {
		out += "?" + escapeQuery(u.RawQuery)
	}
	return out
}

// escapeQuery percent-encodes what url.Parse lets through a query but a
// Location header should not carry raw: spaces, quotes, angle brackets
// and bytes outside ASCII.
func escapeQuery(q string) string {
	var b strings.Builder
	for i := 0; i < len(q); i++ {
		c := q[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"<>`{}|^", c) >= 0 {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
