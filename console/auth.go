package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The console's safety rules, in one place (after the OWASP session
// management and CSRF cheat sheets):
//   - a login is a session in Redis (session.go): a random ID per login,
//     the only thing its cookie carries, with an absolute and an idle
//     expiry, deleted at logout;
//   - every change is a POST from the console's own origin (Origin and
//     Sec-Fetch-Site, when the browser sends them, must say so) carrying
//     a CSRF token: under a login, the token stored in its session (so a
//     token taken elsewhere, say from an anonymous page, does not fit);
//     without one, the console's token in a form field (for scripts) and
//     the token of the browser's pre-session csrf cookie;
//   - the login form's POST has the same origin and pre-session CSRF
//     checks, a rate limit per client address and for all clients
//     (limit.go), and compares the token in constant time; a change
//     carrying the token in a form field goes through the same limits;
//   - over TLS the cookies are __Host- cookies (Secure, Path=/, no
//     Domain), which no other site of the domain can set or overwrite;
//   - on loopback the read-only pages are open, elsewhere they need the
//     login too;
//   - on loopback the Host header must be a loopback name, so a page on
//     another site cannot reach the console through DNS rebinding.
const (
	csrfCookie = "tierset_csrf"
	authCookie = "tierset_auth"
)

// cookieName is a cookie's name for r: with the __Host- prefix over TLS.
func (s *Console) cookieName(r *http.Request, base string) string {
	if s.overTLS(r) {
		return "__Host-" + base
	}
	return base
}

// setCookie sets a console cookie: HttpOnly, SameSite=Strict, Path=/ and
// no Domain, Secure over TLS (as __Host- requires); maxAge < 0 deletes it.
func (s *Console) setCookie(w http.ResponseWriter, r *http.Request, base, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: s.cookieName(r, base), Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: s.overTLS(r), SameSite: http.SameSiteStrictMode})
}

func (s *Console) mac(parts ...string) string {
	m := hmac.New(sha256.New, s.secret)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return hex.EncodeToString(m.Sum(nil))
}

// csrfFor is the form token of a browser's pre-session csrf cookie value.
func (s *Console) csrfFor(cookie string) string { return s.mac("csrf", cookie) }

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// tokenOK compares a token typed or sent with the console's in constant
// time, its length included (both are hashed first).
func (s *Console) tokenOK(got string) bool {
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(s.cfg.token))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// authed reports whether the request comes under a valid login.
func (s *Console) authed(r *http.Request) bool { return sessionOf(r) != nil }

// csrfToken returns the form token for r: its session's, or the one of
// the pre-session csrf cookie, setting that cookie first when the browser
// has none.
func (s *Console) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if sess := sessionOf(r); sess != nil {
		return sess.csrf
	}
	name := s.cookieName(r, csrfCookie)
	if c, err := r.Cookie(name); err == nil && len(c.Value) == 32 {
		return s.csrfFor(c.Value)
	}
	v := randomHex(16)
	s.setCookie(w, r, csrfCookie, v, 0)
	r.AddCookie(&http.Cookie{Name: name, Value: v}) // the rest of this request sees it
	return s.csrfFor(v)
}

// preSessionCSRF reports whether the form's csrf fits the browser's
// pre-session csrf cookie.
func (s *Console) preSessionCSRF(r *http.Request) bool {
	c, err := r.Cookie(s.cookieName(r, csrfCookie))
	return err == nil && len(c.Value) == 32 && equal(r.PostForm.Get("csrf"), s.csrfFor(c.Value))
}

// sameOrigin refuses a POST a browser sent from another origin: a
// Sec-Fetch-Site other than same-origin (or none: typed by the user), or
// an Origin other than the console's own (a sibling site of the same
// domain is another origin; so is "null"). A request with neither header
// (a script, an old browser) is left to the CSRF and token checks. It
// writes the refusal and returns false.
func (s *Console) sameOrigin(w http.ResponseWriter, r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		http.Error(w, "refused: a change must come from the console's own pages (Sec-Fetch-Site: "+site+")", http.StatusForbidden)
		return false
	}
	if o := r.Header.Get("Origin"); o != "" && !s.ownOrigin(r, o) {
		http.Error(w, "refused: a change must come from the console's own origin, not "+o, http.StatusForbidden)
		return false
	}
	return true
}

// ownOrigin reports whether origin is the console's as r reached it: the
// Host the browser asked for (X-Forwarded-Host behind a declared proxy),
// over https, or http when the request did not come over TLS.
func (s *Console) ownOrigin(r *http.Request, origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") {
		return false
	}
	tls := s.overTLS(r)
	if u.Scheme != "https" && (u.Scheme != "http" || tls) {
		return false
	}
	host := r.Host
	if s.cfg.trustProxy {
		if fh, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Host"), ","); strings.TrimSpace(fh) != "" {
			host = strings.TrimSpace(fh)
		}
	}
	return strings.EqualFold(hostPort(u.Host, u.Scheme), hostPort(host, u.Scheme))
}

// hostPort drops the scheme's default port, which an Origin leaves out.
func hostPort(h, scheme string) string {
	if scheme == "https" {
		return strings.TrimSuffix(h, ":443")
	}
	return strings.TrimSuffix(h, ":80")
}

// checkPost refuses a change that is not a POST from the console's
// origin with either the CSRF token of its login's session, or the
// console's token and the pre-session CSRF token; it writes the refusal
// and returns false.
func (s *Console) checkPost(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "changes are POST only", http.StatusMethodNotAllowed)
		return false
	}
	if !s.sameOrigin(w, r) {
		return false
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return false
	}
	if sess := sessionOf(r); sess != nil && equal(r.PostForm.Get("csrf"), sess.csrf) {
		return true
	}
	if !s.preSessionCSRF(r) {
		http.Error(w, "refused: missing or wrong CSRF token (reload the page and try again)", http.StatusForbidden)
		return false
	}
	// The token field is a guess of the token as the login form's is: it
	// goes through the same limits, or it would be a way around them.
	addr, ok := s.attempt(w, r)
	if !ok {
		return false
	}
	if !s.tokenOK(r.PostForm.Get("token")) {
		http.Error(w, "refused: changes need the console's token (log in first)", http.StatusForbidden)
		return false
	}
	s.limiter.refund(addr)
	return true
}

// attempt takes a guess of the token from the login limits (limit.go)
// for r's client before the token is compared: past either limit it
// answers 429 with Retry-After and returns false. A guess that turns out
// right is given back with s.limiter.refund(addr).
func (s *Console) attempt(w http.ResponseWriter, r *http.Request) (addr string, ok bool) {
	addr = s.clientAddr(r)
	if wait, ok := s.limiter.take(addr, s.cfg.now()); !ok {
		secs := int((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		http.Error(w, fmt.Sprintf("too many login attempts: try again in %d s", secs), http.StatusTooManyRequests)
		return addr, false
	}
	return addr, true
}

// guard wraps every route: security headers, the Host check, the
// request's session and, off loopback, the login for reads.
func (s *Console) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		// same-origin, not no-referrer: under no-referrer a browser sends
		// "Origin: null" with the console's own form POSTs, which
		// sameOrigin must refuse (a sandboxed frame sends it too); links
		// off the console still carry no referrer.
		h.Set("Referrer-Policy", "same-origin")
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
		}
		if r.URL.Path == "/style.css" {
			next.ServeHTTP(w, r)
			return
		}
		sess, err := s.loadSession(r.Context(), r)
		if err != nil && !s.cfg.loopback {
			// The login cannot be checked: the banner, without the
			// error's text (an address, say) for a browser not logged in.
			s.renderDown(w, r, errors.New("the login cannot be checked"))
			return
		}
		// On loopback a failed read is no login; the page's own ping
		// shows the banner.
		r = withSession(r, sess)
		if !s.cfg.loopback && sess == nil && r.URL.Path != "/login" {
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
	if !s.sameOrigin(w, r) {
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	// A browser already logged in was shown its session's token.
	if sess := sessionOf(r); (sess == nil || !equal(r.PostForm.Get("csrf"), sess.csrf)) && !s.preSessionCSRF(r) {
		http.Error(w, "refused: missing or wrong CSRF token (reload the page and try again)", http.StatusForbidden)
		return
	}
	addr, ok := s.attempt(w, r)
	if !ok {
		return
	}
	if !s.tokenOK(r.PostForm.Get("token")) {
		http.Error(w, "wrong token", http.StatusForbidden)
		return
	}
	s.limiter.refund(addr)
	// A new ID at every login, and the browser's old one ended: a session
	// ID planted before the login is never the one logged in.
	if old := sessionOf(r); old != nil {
		if err := s.dropSession(r.Context(), old.id); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	sess, err := s.newSession(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.setCookie(w, r, authCookie, sess.id, int(s.cfg.session/time.Second))
	http.Redirect(w, r, safeNext(r.PostForm.Get("next")), http.StatusSeeOther)
}

func (s *Console) logout(w http.ResponseWriter, r *http.Request) {
	if !s.checkPost(w, r) {
		return
	}
	if sess := sessionOf(r); sess != nil {
		if err := s.dropSession(r.Context(), sess.id); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	s.setCookie(w, r, authCookie, "", -1)
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
