package main

import (
	"context"
	"fmt"
	"os"
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

// connect opens -redis, else $TIERSET_REDIS_URL: a redis:// or rediss://
// URL, or comma-separated host:port seeds of a Redis Cluster (through
// tierset.ClusterOptions), and names it on stderr (sayTarget). When both
// are empty it starts an embedded miniredis and prints the warning to
// stderr. Every client honours ctx deadlines (ContextTimeoutEnabled), and
// every message shows the URL with its password redacted.
func connect(ctx context.Context, rawURL string, e *env) (*backend, error) {
	rawURL, from := redisconf.FromEnv(rawURL, os.Getenv)
	if rawURL == "" {
		return connectEmbedded(e)
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
	sayTarget(e, tgt, from)
	return &backend{client: c, close: func() { _ = c.Close() }}, nil
}

// sayTarget names on stderr, before anything is read or written, the
// server and database a command uses and where that came from, so an
// operator never writes to a Redis they did not mean (the password is
// never shown).
func sayTarget(e *env, tgt redisconf.Target, from string) {
	fmt.Fprintf(e.stderr, "tierset: %s (from %s)\n", tgt, from)
}

// redisGiven reports whether -redis or $TIERSET_REDIS_URL names a server.
func redisGiven(flagValue string) bool {
	raw, _ := redisconf.FromEnv(flagValue, os.Getenv)
	return raw != ""
}

// connectEmbedded starts an embedded miniredis and prints the warning to
// stderr.
func connectEmbedded(e *env) (*backend, error) {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		return nil, fmt.Errorf("start embedded redis: %w", err)
	}
	fmt.Fprintln(e.stderr, embeddedWarning)
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	return &backend{client: c, embedded: true, close: func() { _ = c.Close(); m.Close() }}, nil
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
