package pg

import (
	"net/url"
	"regexp"
)

var dsnPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// RedactURL returns a connection string fit to print: a password in the
// URL's user info or its query, or in a key=value DSN, is replaced by
// "xxxxx".
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return dsnPassword.ReplaceAllString(raw, "${1}xxxxx")
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}
