// Package redisconf holds what tierset asks of a go-redis client, checked
// in one place for cache.New and delay.New, and how a Redis URL is
// printed: with its password redacted.
package redisconf

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// errDeadlines is wrapped in the error CheckDeadlines returns; callers
// wrap that error in their own package's options sentinel.
var errDeadlines = errors.New("ContextTimeoutEnabled is false")

// CheckDeadlines returns an error naming the option when c is a
// *redis.Client, *redis.ClusterClient or *redis.Ring built with
// ContextTimeoutEnabled false. go-redis then never puts a ctx deadline on
// the socket: during a Redis stall a read waits out ReadTimeout (3 s by
// default) whatever the ctx says. Other client types cannot be inspected
// and pass.
func CheckDeadlines(c any) error {
	var on bool
	switch x := c.(type) {
	case *redis.Client:
		on = x.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		on = x.Options().ContextTimeoutEnabled
	case *redis.Ring:
		on = x.Options().ContextTimeoutEnabled
	default:
		return nil
	}
	if on {
		return nil
	}
	return fmt.Errorf("the %T has %w, so ctx deadlines never reach its socket (a read waits out ReadTimeout whatever the ctx says); build it with ContextTimeoutEnabled: true", c, errDeadlines)
}

// Redacted is what replaces a password.
const Redacted = "xxxxx"

// Redact returns a Redis URL (or comma-separated list of them) fit to
// print: the password, or a lone user-info part that older clients read
// as one, becomes "xxxxx" ("redis://:xxxxx@host:6379/0"), and so does the
// value of any query parameter named like a secret. It never fails: text
// that does not parse as a URL is redacted by its shape.
func Redact(s string) string {
	if !strings.ContainsAny(s, "@?") {
		return s
	}
	parts := Split(s)
	for i, p := range parts {
		parts[i] = redactOne(p)
	}
	return strings.Join(parts, ",")
}

// Split returns the parts of a -redis style value: the value itself when
// it holds exactly one "://" (a URL, whose password may contain commas),
// otherwise its comma-separated parts (cluster seeds).
func Split(s string) []string {
	if strings.Count(s, "://") == 1 {
		return []string{s}
	}
	return strings.Split(s, ",")
}

func redactOne(s string) string {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Opaque != "" {
		return redactShape(s)
	}
	if u.User != nil {
		name := u.User.Username()
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(name, Redacted)
		} else {
			u.User = url.User(Redacted)
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			if secretName(k) {
				q[k] = []string{Redacted}
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// redactShape handles text url.Parse refuses (a bad port, a stray %):
// everything between "://" and the last "@" before the path is user
// info, and any query is dropped.
func redactShape(s string) string {
	if i := strings.IndexByte(s, '?'); i >= 0 {
		s = s[:i] + "?" + Redacted
	}
	start, at, ok := userInfo(s)
	if !ok {
		return s
	}
	info := s[start:at]
	if c := strings.IndexByte(info, ':'); c >= 0 {
		info = info[:c+1] + Redacted
	} else {
		info = Redacted
	}
	return s[:start] + info + s[at:]
}

// userInfo finds the user info of URL-shaped text without parsing it:
// s[start:at] is what lies between "://" (or the start) and the last "@"
// before the path, query or fragment.
func userInfo(s string) (start, at int, ok bool) {
	if i := strings.Index(s, "://"); i >= 0 {
		start = i + 3
	}
	end := len(s)
	if i := strings.IndexAny(s[start:], "/?#"); i >= 0 {
		end = start + i
	}
	a := strings.LastIndexByte(s[start:end], '@')
	if a < 0 {
		return 0, 0, false
	}
	return start, start + a, true
}

func secretName(k string) bool {
	k = strings.ToLower(k)
	for _, w := range []string{"pass", "auth", "secret", "token", "key"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// Secrets returns the secret strings in a Redis URL (or list): the
// password or lone user info and secret-named query values, raw and
// URL-decoded, so an output filter can remove them from text that quotes
// the URL some other way (url.Error quotes it whole).
func Secrets(s string) []string {
	var out []string
	add := func(v string) {
		if v != "" && v != Redacted {
			out = append(out, v)
			if d, err := url.PathUnescape(v); err == nil && d != v {
				out = append(out, d)
			}
		}
	}
	for _, p := range Split(s) {
		if start, at, ok := userInfo(p); ok {
			info := p[start:at]
			if c := strings.IndexByte(info, ':'); c >= 0 {
				add(info[c+1:])
			} else {
				add(info)
			}
		}
		if i := strings.IndexByte(p, '?'); i >= 0 {
			for _, kv := range strings.Split(p[i+1:], "&") {
				if k, v, ok := strings.Cut(kv, "="); ok && secretName(k) {
					add(v)
				}
			}
		}
	}
	return out
}
