package main

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/redisconf"
)

const webSynopsis = "tierset web -redis URL | -cluster SEEDS [-listen 127.0.0.1:8080] [-token T] [-queues NAME,...] [-prefix P] [-cache-prefix P]"

// webTokenEnv names the variable that may hold the console's token.
const webTokenEnv = "TIERSET_WEB_TOKEN"

//go:embed web
var webFiles embed.FS

// errNoQueue: the console knows no queue of that name.
var errNoQueue = errors.New("no such queue")

// errBadParam: a page's query parameter has a value the page does not know.
var errBadParam = errors.New("bad parameter")

// webConfig is what cmdWeb parsed; newWebServer builds the console from it.
type webConfig struct {
	client      redis.UniversalClient
	redisShown  string // the -redis URL redacted, or the cluster seeds
	token       string
	loopback    bool
	queuePrefix string
	cachePrefix string
	queues      []string      // fixed list; nil: discover under queuePrefix
	idsTTL      time.Duration // how long a promotion ID listing is reused
	session     time.Duration // the login cookie's Max-Age
	trustProxy  bool          // X-Forwarded-Proto is the operator's proxy speaking
	now         func() time.Time
}

func cmdWeb(ctx context.Context, args []string, e *env) error {
	fs := newFlags("web", webSynopsis)
	redisURL := fs.String("redis", "", "Redis: host:port, a redis:// or rediss:// `URL`, or comma-separated cluster seeds")
	cluster := fs.String("cluster", "", "comma-separated Redis Cluster `seeds` (the same as -redis with seeds)")
	listen := fs.String("listen", "127.0.0.1:8080", "`address` to serve on; a non-loopback address needs the token for every page")
	token := fs.String("token", "", "the `token` that unlocks changes (default $"+webTokenEnv+", else a random one printed at start-up)")
	queues := fs.String("queues", "", "comma-separated queue `names` (default: every queue found under -prefix, rescanned each minute)")
	prefix := fs.String("prefix", delay.DefaultPrefix, "queue key `prefix`")
	cachePrefix := fs.String("cache-prefix", cache.DefaultPrefix, "promotion key `prefix`")
	idsTTL := fs.Duration("ids-ttl", 10*time.Second, "reuse a listing of promotion IDs for this `long` (0: list on every request)")
	session := fs.Duration("session", 12*time.Hour, "a login lasts this `long` (the cookie's Max-Age)")
	trustProxy := fs.Bool("trust-proxy", false, "the console is behind a proxy you run that sets X-Forwarded-Proto:\nits https makes the cookies Secure (without this flag the header is ignored)")
	tlsCert := fs.String("tls-cert", "", "serve HTTPS with this certificate `file` (with -tls-key)")
	tlsKey := fs.String("tls-key", "", "the private key `file` of -tls-cert")
	if err := fs.parse(args, e); err != nil {
		return err
	}
	if (*redisURL == "") == (*cluster == "") {
		return usagef("want exactly one of -redis URL or -cluster seeds")
	}
	if *session < time.Minute {
		return usagef("-session %v: want at least 1m", *session)
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		return usagef("-tls-cert and -tls-key go together")
	}
	cfg := webConfig{token: *token, queuePrefix: *prefix, cachePrefix: *cachePrefix, idsTTL: *idsTTL, now: time.Now,
		session: *session, trustProxy: *trustProxy}
	if cfg.token == "" {
		cfg.token = os.Getenv(webTokenEnv)
	}
	printToken := cfg.token == ""
	if printToken {
		cfg.token = randomHex(16)
	}
	for _, n := range strings.Split(*queues, ",") {
		if n = strings.TrimSpace(n); n != "" {
			if err := delay.ValidateName(n); err != nil {
				return usagef("-queues %q: %v", n, err)
			}
			cfg.queues = append(cfg.queues, n)
		}
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return usagef("-listen %q: %v", *listen, err)
	}
	cfg.loopback = isLoopbackHost(host)
	if !cfg.loopback && printToken {
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
	cfg.client = newClient(tgt)
	if tgt.Single != nil {
		cfg.redisShown = webShownURL(raw)
	} else {
		cfg.redisShown = "cluster " + strings.Join(tgt.Seeds, ",")
	}
	defer cfg.client.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = cfg.client.Ping(pctx).Err()
	cancel()
	if err != nil {
		return fmt.Errorf("redis %s: %w", cfg.redisShown, err)
	}
	srv, err := newWebServer(ctx, cfg)
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
	fmt.Fprintf(e.stderr, "tierset web: serving %s on %s://%s/\n", cfg.redisShown, scheme, ln.Addr())
	if printToken {
		fmt.Fprintf(e.stderr, "tierset web: token for changes (requeue, purge): %s\n", cfg.token)
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

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it panics instead)
	return hex.EncodeToString(b)
}

// webServer is the console: an http.Handler over the library's public API.
type webServer struct {
	cfg    webConfig
	secret []byte
	tmpl   *template.Template
	mux    *http.ServeMux

	mu         sync.Mutex
	queues     []*delay.Queue
	discovered time.Time
	caches     map[int]*cache.Cache // by minor digits
	rates      map[string][]rateSample
	ids        []string
	idsAt      time.Time
	listing    bool // a background listing is running
}

func newWebServer(ctx context.Context, cfg webConfig) (*webServer, error) {
	tmpl, err := template.New("").Funcs(webFuncs).ParseFS(webFiles, "web/*.html")
	if err != nil {
		return nil, err
	}
	if cfg.session <= 0 {
		cfg.session = 12 * time.Hour
	}
	s := &webServer{cfg: cfg, secret: []byte(randomHex(32)), tmpl: tmpl, mux: http.NewServeMux(),
		caches: map[int]*cache.Cache{}, rates: map[string][]rateSample{}}
	if _, err := s.cacheFor(cache.DefaultMinorDigits); err != nil {
		return nil, usagef("-cache-prefix: %v", err)
	}
	if err := s.loadQueues(ctx, true); err != nil {
		return nil, err
	}
	if cfg.idsTTL > 0 {
		// The one SCAN a reader would wait for happens here: from now on
		// a stale listing is answered at once and replaced behind it.
		if _, _, err := s.listIDs(ctx); err != nil {
			return nil, fmt.Errorf("listing promotions: %w", err)
		}
	}
	s.routes()
	return s, nil
}

// loadQueues (re)builds the queue list: the fixed -queues, or Discover
// once a minute.
func (s *webServer) loadQueues(ctx context.Context, force bool) error {
	s.mu.Lock()
	stale := force || s.cfg.queues == nil && s.cfg.now().Sub(s.discovered) > time.Minute
	s.mu.Unlock()
	if !stale {
		return nil
	}
	names := s.cfg.queues
	if names == nil {
		var err error
		if names, err = delay.Discover(ctx, s.cfg.client, s.cfg.queuePrefix); err != nil {
			return err
		}
	}
	qs := make([]*delay.Queue, 0, len(names))
	for _, n := range names {
		q, err := delay.New(s.cfg.client, n, delay.Options{Prefix: s.cfg.queuePrefix})
		if err != nil {
			return usagef("queue %q: %v", n, err)
		}
		qs = append(qs, q)
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].Name() < qs[j].Name() })
	s.mu.Lock()
	s.queues, s.discovered = qs, s.cfg.now()
	s.mu.Unlock()
	return nil
}

func (s *webServer) queueList(ctx context.Context) ([]*delay.Queue, error) {
	if err := s.loadQueues(ctx, false); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queues, nil
}

func (s *webServer) queue(ctx context.Context, name string) (*delay.Queue, error) {
	qs, err := s.queueList(ctx)
	if err != nil {
		return nil, err
	}
	for _, q := range qs {
		if q.Name() == name {
			return q, nil
		}
	}
	return nil, fmt.Errorf("%w: %q under prefix %q", errNoQueue, name, s.cfg.queuePrefix)
}

// cacheFor returns the Cache that encodes amount queries with digits minor
// digits, as a cart of that currency would.
func (s *webServer) cacheFor(digits int) (*cache.Cache, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.caches[digits]; ok {
		return c, nil
	}
	opts := cache.Options{Prefix: s.cfg.cachePrefix, MinorDigits: digits, Now: s.cfg.now}
	if digits == 0 {
		opts.NoMinorUnits = true
	}
	c, err := cache.New(s.cfg.client, opts)
	if err != nil {
		return nil, err
	}
	s.caches[digits] = c
	return c, nil
}

// promotionIDs lists the stored IDs. With idsTTL > 0 a listing is reused,
// and one older than idsTTL is answered at once while a fresh one is made
// in the background (listing SCANs the whole keyspace: 130 ms at 10k
// promotions beside 100k tasks), so only the first request waits for it.
func (s *webServer) promotionIDs(ctx context.Context) ([]string, time.Time, error) {
	s.mu.Lock()
	ids, at := s.ids, s.idsAt
	stale := ids == nil || s.cfg.now().Sub(at) >= s.cfg.idsTTL
	relist := stale && ids != nil && s.cfg.idsTTL > 0 && !s.listing
	if relist {
		s.listing = true
	}
	s.mu.Unlock()
	if relist {
		go func() {
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			_, _, _ = s.listIDs(lctx) // a failure keeps the old listing; the next request retries
			s.mu.Lock()
			s.listing = false
			s.mu.Unlock()
		}()
	}
	if !stale || relist {
		return ids, at, nil
	}
	return s.listIDs(ctx)
}

func (s *webServer) listIDs(ctx context.Context) ([]string, time.Time, error) {
	c, err := s.cacheFor(cache.DefaultMinorDigits)
	if err != nil {
		return nil, time.Time{}, err
	}
	ids, err := c.IDs(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	at := s.cfg.now()
	s.mu.Lock()
	s.ids, s.idsAt = ids, at
	s.mu.Unlock()
	return ids, at, nil
}
