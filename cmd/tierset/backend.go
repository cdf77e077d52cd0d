package main

import (
	"context"
	"fmt"
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
	tgt, err := redisconf.Parse(rawURL)
	if err != nil {
		return nil, usagef("-redis: %v", err)
	}
	// One dial (and TLS handshake) first: its failure is one clear line
	// within the dial timeout, where a PING would retry and end in a
	// bare deadline.
	if err := redisconf.Probe(ctx, tgt, dialTimeout); err != nil {
		return nil, fmt.Errorf("redis %s: %w", shown, err)
	}
	c := newClient(tgt)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("redis %s: %w", shown, err)
	}
	return &backend{client: c, close: func() { _ = c.Close() }}, nil
}

// dialTimeout bounds the first dial of every command.
const dialTimeout = 3 * time.Second

// newClient builds the client of a parsed -redis value: a cluster's with
// the library's tuned options. A single server's client keeps its dial
// errors (tierset.KeepDialErrors), so that a server lost after the first
// dial is named by its refusal, not only by a deadline, in the CLI's
// line and on the console's pages.
func newClient(t redisconf.Target) redis.UniversalClient {
	if t.Single != nil {
		c := redis.NewClient(t.Single)
		_ = tierset.KeepDialErrors(c) // never refuses a *redis.Client
		return c
	}
	return redis.NewClusterClient(t.ClusterOptions(tierset.ClusterOptions()))
}
