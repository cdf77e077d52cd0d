package redisconf

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultPort is the port of a host given without one.
const DefaultPort = "6379"

// Target is a parsed -redis value: one server, or the seeds of a Redis
// Cluster. Every command-line tool of the repository reads -redis with
// Parse, so each takes the same forms.
type Target struct {
	// Single is the standalone server's options, ContextTimeoutEnabled
	// set; nil for a cluster.
	Single *redis.Options
	// Seeds are a cluster's seed addresses; nil for a standalone server.
	Seeds []string
	// Username, Password and TLS apply to every seed (from the first
	// seed given as a URL).
	Username, Password string
	TLS                *tls.Config
}

// Parse reads a -redis value, in any of these forms:
//
//	host:port, host (port 6379), [::1]:6379
//	redis://[user:password@]host[:port][/db][?options]   (go-redis's ParseURL)
//	rediss://...                                          (TLS)
//	unix:///path/to/redis.sock
//	host:port,host:port,...                               cluster seeds (host:port or URLs)
//	host:port,                                            a cluster reached through one seed
//
// Its errors show the value redacted (Redact), never its password.
func Parse(raw string) (Target, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return Target{}, errors.New("empty: want host:port, a redis:// or rediss:// URL, or comma-separated cluster seeds")
	}
	parts := Split(raw)
	if first, _, ok := strings.Cut(raw, ","); ok && len(parts) == 1 && !strings.Contains(first, "://") {
		// host:port,redis://...: seeds, the one URL among them not first.
		parts = strings.Split(raw, ",")
	}
	if len(parts) == 1 {
		opt, err := parseOne(parts[0])
		if err != nil {
			return Target{}, err
		}
		return Target{Single: opt, Username: opt.Username, Password: opt.Password, TLS: opt.TLSConfig}, nil
	}
	var t Target
	for i, p := range parts {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		opt, err := parseOne(p)
		if err != nil {
			return Target{}, err
		}
		if opt.Network == "unix" {
			return Target{}, fmt.Errorf("cluster seed %s: a unix socket cannot be a cluster seed", Redact(p))
		}
		if opt.DB != 0 {
			return Target{}, fmt.Errorf("cluster seed %s: a cluster has only database 0", Redact(p))
		}
		if len(t.Seeds) == 0 {
			t.Username, t.Password, t.TLS = opt.Username, opt.Password, opt.TLSConfig
		} else if (opt.TLSConfig != nil) != (t.TLS != nil) {
			return Target{}, fmt.Errorf("cluster seed %d (%s): every seed must use TLS (rediss://) or none", i+1, Redact(p))
		}
		t.Seeds = append(t.Seeds, opt.Addr)
	}
	if len(t.Seeds) == 0 {
		return Target{}, errors.New("no cluster seed (want host:port, comma-separated)")
	}
	return t, nil
}

func parseOne(s string) (*redis.Options, error) {
	if strings.Contains(s, "://") {
		opt, err := redis.ParseURL(s)
		if err != nil {
			// url.Error quotes the whole URL, password included: keep only its cause.
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return nil, fmt.Errorf("%s: %v", Redact(s), err)
		}
		opt.ContextTimeoutEnabled = true
		return opt, nil
	}
	if strings.ContainsAny(s, "@/?#") {
		return nil, fmt.Errorf("%s: want host:port, or a redis:// or rediss:// URL for a password or options", Redact(s))
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		// A bare host ("localhost", "::1") takes the default port.
		host, port = strings.Trim(s, "[]"), DefaultPort
		if strings.Count(s, ":") == 1 && !strings.HasPrefix(s, "[") {
			return nil, fmt.Errorf("%s: want host:port", s)
		}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return nil, fmt.Errorf("%s: port %q is not a number from 1 to 65535", s, port)
	}
	if host == "" {
		host = "localhost"
	}
	return &redis.Options{Addr: net.JoinHostPort(host, port), ContextTimeoutEnabled: true}, nil
}

// Addr is the first address the target dials.
func (t Target) Addr() string {
	if t.Single != nil {
		return t.Single.Addr
	}
	return t.Seeds[0]
}

// Network is "unix" for a socket, else "tcp".
func (t Target) Network() string {
	if t.Single != nil && t.Single.Network == "unix" {
		return "unix"
	}
	return "tcp"
}

// ClusterOptions fills base (the caller's tuned defaults, such as
// tierset.ClusterOptions()) with the seeds, credentials and TLS.
func (t Target) ClusterOptions(base *redis.ClusterOptions) *redis.ClusterOptions {
	base.Addrs = t.Seeds
	base.Username, base.Password, base.TLSConfig = t.Username, t.Password, t.TLS
	base.ContextTimeoutEnabled = true
	return base
}

// Probe dials the target's first address once, and completes a TLS
// handshake when the target uses TLS, all within timeout. Its error says
// which step failed, and for TLS that the server may not speak it: a
// client that only PINGs would see a bare deadline after its retries.
func Probe(ctx context.Context, t Target, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addr := t.Addr()
	var d net.Dialer
	conn, err := d.DialContext(ctx, t.Network(), addr)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("cannot connect to %s: no answer within %v", addr, timeout)
		}
		return fmt.Errorf("cannot connect to %s: %w", addr, err)
	}
	defer conn.Close()
	if t.TLS == nil {
		return nil
	}
	cfg := t.TLS.Clone()
	if cfg.ServerName == "" {
		if h, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = h
		}
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			err = fmt.Errorf("no handshake within %v", timeout)
		}
		return fmt.Errorf("TLS handshake with %s failed (rediss:// needs a server port that speaks TLS; use redis:// for a plain one): %w", addr, err)
	}
	return nil
}

// EnvURL is the environment variable every command-line tool of the
// repository (tierset, tierset-pg, the example cart service) reads when
// -redis is not given.
const EnvURL = "TIERSET_REDIS_URL"

// FromEnv is flagValue when set, else $TIERSET_REDIS_URL; from says which
// ("-redis", "$TIERSET_REDIS_URL", or "" when both are empty).
func FromEnv(flagValue string, getenv func(string) string) (raw, from string) {
	if flagValue != "" {
		return flagValue, "-redis"
	}
	if v := getenv(EnvURL); v != "" {
		return v, "$" + EnvURL
	}
	return "", ""
}

// String names the server and database, never the password: "redis
// 10.0.0.5:6379 db 2 (TLS, user app)" or "redis cluster 10.0.0.5:7000,
// 10.0.0.6:7000". Every tool prints it before it reads or writes, so an
// operator sees which Redis a command touched.
func (t Target) String() string {
	var b strings.Builder
	if t.Single != nil {
		if t.Single.Network == "unix" {
			fmt.Fprintf(&b, "redis unix:%s db %d", t.Single.Addr, t.Single.DB)
		} else {
			fmt.Fprintf(&b, "redis %s db %d", t.Single.Addr, t.Single.DB)
		}
	} else {
		fmt.Fprintf(&b, "redis cluster %s", strings.Join(t.Seeds, ","))
	}
	var notes []string
	if t.TLS != nil {
		notes = append(notes, "TLS")
	}
	if t.Username != "" {
		notes = append(notes, "user "+t.Username)
	}
	if len(notes) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(notes, ", "))
	}
	return b.String()
}
