package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/console"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/keyname"
	"github.com/tierset/tierset/internal/redisconf"
)

const webSynopsis = "tierset web -redis URL | -cluster SEEDS [-listen 127.0.0.1:8080] [-token T] [-queues NAME,...] [-prefix P] [-cache-prefix P]"

// webTokenEnv names the variable that may hold the console's token.
const webTokenEnv = "TIERSET_WEB_TOKEN"

func cmdWeb(ctx context.Context, args []string, e *env) error {
	fs := newFlags("web", webSynopsis)
	redisURL := fs.String("redis", "", "Redis: host:port, a redis:// or rediss:// `URL`, or comma-separated cluster seeds (default $TIERSET_REDIS_URL)")
	cluster := fs.String("cluster", "", "comma-separated Redis Cluster `seeds` (the same as -redis with seeds)")
	listen := fs.String("listen", "127.0.0.1:8080", "`address` to serve on; a non-loopback address needs the token for every page")
	token := fs.String("token", "", "the `token` that unlocks changes (default $"+webTokenEnv+", else a random one printed at start-up)")
	queues := fs.String("queues", "", "comma-separated queue `names` (default: every queue found under -prefix, rescanned each minute)")
	prefix := fs.String("prefix", delay.DefaultPrefix, "queue key `prefix`")
	cachePrefix := fs.String("cache-prefix", cache.DefaultPrefix, "promotion key `prefix`")
	idsTTL := fs.Duration("ids-ttl", 10*time.Second, "reuse a listing of promotion IDs for this `long` (0: list on every request)")
	session := fs.Duration("session", 12*time.Hour, "a login lasts at most this `long` (kept in Redis; the cookie's Max-Age)")
	idle := fs.Duration("session-idle", 30*time.Minute, "a login unused this `long` ends (at most -session)")
	trustProxy := fs.Bool("trust-proxy", false, "the console is behind a proxy you run that sets X-Forwarded-Proto:\nits https makes the cookies Secure (without this flag the header is ignored)")
	tz := fs.String("tz", "UTC", "show times in this IANA time `zone` (\"Local\": this machine's), each with its zone's name")
	tlsCert := fs.String("tls-cert", "", "serve HTTPS with this certificate `file` (with -tls-key)")
	tlsKey := fs.String("tls-key", "", "the private key `file` of -tls-cert")
	if err := fs.parse(args, e); err != nil {
		return err
	}
	from := "-redis"
	if *cluster != "" {
		from = "-cluster"
	} else if *redisURL == "" {
		*redisURL, from = redisconf.FromEnv("", os.Getenv)
	}
	if (*redisURL == "") == (*cluster == "") {
		return usagef("want exactly one of -redis URL or -cluster seeds")
	}
	if *session < time.Minute {
		return usagef("-session %v: want at least 1m", *session)
	}
	if *idle < time.Minute {
		return usagef("-session-idle %v: want at least 1m", *idle)
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		return usagef("-tls-cert and -tls-key go together")
	}
	loc, err := time.LoadLocation(*tz)
	if err != nil {
		return usagef("-tz %q: %v", *tz, err)
	}
	cfg := console.Options{Token: *token, QueuePrefix: *prefix, CachePrefix: *cachePrefix, IDsTTL: *idsTTL,
		Session: *session, SessionIdle: *idle, TrustProxy: *trustProxy, Location: loc}
	if cfg.IDsTTL == 0 {
		cfg.IDsTTL = -1 // the flag's 0 is "list on every request"
	}
	if cfg.Token == "" {
		cfg.Token = os.Getenv(webTokenEnv)
	}
	printToken := cfg.Token == ""
	if printToken {
		cfg.Token = randomHex(16)
	}
	for _, n := range strings.Split(*queues, ",") {
		if n = strings.TrimSpace(n); n != "" {
			if err := keyname.Check(n); err != nil {
				return usagef("-queues %q: invalid queue name: %v", n, err)
			}
			cfg.Queues = append(cfg.Queues, n)
		}
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return usagef("-listen %q: %v", *listen, err)
	}
	cfg.Loopback = console.IsLoopback(host)
	if !cfg.Loopback && printToken {
		return usagef("-listen %q is not loopback: set -token or $%s so the console is not open to the network with a token only this terminal saw", *listen, webTokenEnv)
	}
	raw := *redisURL
	if *cluster != "" {
		raw = *cluster
		if !strings.Contains(raw, ",") {
			raw += "," // one seed is still a cluster
		}
	}
	tgt, err := redisconf.Parse(raw)
	if err != nil {
		return usagef("-redis: %v", err)
	}
	if err := redisconf.Probe(ctx, tgt, dialTimeout); err != nil {
		return fmt.Errorf("redis %s: %w", redisconf.Redact(raw), err)
	}
	sayTarget(e, tgt, from)
	cfg.Client = newClient(tgt)
	if tgt.Single != nil {
		cfg.Redis = webShownURL(raw)
	} else {
		cfg.Redis = "cluster " + strings.Join(tgt.Seeds, ",")
	}
	defer cfg.Client.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = cfg.Client.Ping(pctx).Err()
	cancel()
	if err != nil {
		return fmt.Errorf("redis %s: %w", cfg.Redis, err)
	}
	srv, err := console.New(ctx, cfg)
	var oe *console.OptionsError
	if errors.As(err, &oe) {
		return usagef("%v", err)
	}
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	scheme := "http"
	if *tlsCert != "" {
		scheme = "https"
	}
	fmt.Fprintf(e.stderr, "tierset web: serving %s on %s://%s/\n", cfg.Redis, scheme, ln.Addr())
	if printToken {
		fmt.Fprintf(e.stderr, "tierset web: token for changes (requeue, purge): %s\n", cfg.Token)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	serve := func() error { return hs.Serve(ln) }
	if *tlsCert != "" {
		serve = func() error { return hs.ServeTLS(ln, *tlsCert, *tlsKey) }
	}
	if err := serve(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// webShownURL hides a URL's password (and a query's secrets: the whole query).
func webShownURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	u.RawQuery = ""
	return u.Redacted()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it panics instead)
	return hex.EncodeToString(b)
}
