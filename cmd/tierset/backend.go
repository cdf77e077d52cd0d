package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset"
	"github.com/tierset/tierset/internal/redisconf"
	"github.com/tierset/tierset/internal/text"
)

// maxArgLen bounds every command-line argument (paths, URLs, values),
// checked before any flag is parsed.
const maxArgLen = 4096

// quoteArg quotes an argument for a message: whole up to 256 bytes, a
// prefix beyond, escaped either way.
func quoteArg(s string) string { return text.QuoteLimit(s, 256) }

const embeddedWarning = "tierset: warning: no -redis given: using an embedded in-memory Redis; nothing persists after this command exits"

// backend is the Redis a command talks to.
type backend struct {
	client   redis.UniversalClient
	embedded bool
	close    func()
}

// connect opens -redis: a redis:// or rediss:// URL, or comma-separated
// host:port seeds of a Redis Cluster (through tierset.ClusterOptions). An
// empty value starts an embedded miniredis and prints the warning to
// stderr. Every client honours ctx deadlines (ContextTimeoutEnabled), and
// every message shows the URL with its password redacted.
func connect(ctx context.Context, rawURL string, e *env) (*backend, error) {
	if rawURL == "" {
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			return nil, fmt.Errorf("start embedded redis: %w", err)
		}
		fmt.Fprintln(e.stderr, embeddedWarning)
		c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
		return &backend{client: c, embedded: true, close: func() { _ = c.Close(); m.Close() }}, nil
	}
	shown := redisconf.Redact(rawURL)
	var c redis.UniversalClient
	if parts := redisconf.Split(rawURL); len(parts) > 1 {
		addrs, err := clusterSeeds("-redis", rawURL, parts)
		if err != nil {
			return nil, err
		}
		c = redis.NewClusterClient(tierset.ClusterOptions(addrs...))
	} else {
		opt, err := parseRedisURL("-redis", rawURL)
		if err != nil {
			return nil, err
		}
		c = redis.NewClient(opt)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("redis %s: %w", shown, err)
	}
	return &backend{client: c, close: func() { _ = c.Close() }}, nil
}

// clusterSeeds checks the comma-separated parts of flag's value raw as
// host:port seeds. A seed holding "@" or "/" is refused: seeds are printed
// and logged as given, so a password in one would leak.
func clusterSeeds(flag, raw string, parts []string) ([]string, error) {
	var addrs []string
	for _, a := range parts {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if strings.ContainsAny(a, "@/") {
			return nil, usagef("%s %s: cluster seeds are host:port, comma-separated (no URL or password)", flag, quoteArg(redisconf.Redact(raw)))
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return nil, usagef("%s %s: no cluster seed (want host:port, comma-separated)", flag, quoteArg(raw))
	}
	return addrs, nil
}

// parseRedisURL parses flag's value, a redis:// or rediss:// URL, into
// options that honour ctx deadlines; its error shows the URL redacted.
func parseRedisURL(flag, raw string) (*redis.Options, error) {
	opt, err := redis.ParseURL(raw)
	if err != nil {
		// url.Error quotes the whole URL, password included: keep only its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, usagef("%s %s: %v", flag, quoteArg(redisconf.Redact(raw)), err)
	}
	opt.ContextTimeoutEnabled = true
	return opt, nil
}
