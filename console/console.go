package console

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
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/keyname"
	"github.com/tierset/tierset/periodic"
)

//go:embed web
var webFiles embed.FS

// errNoQueue: the console knows no queue of that name.
var errNoQueue = errors.New("no such queue")

// errBadParam: a page's query parameter has a value the page does not know.
var errBadParam = errors.New("bad parameter")

// Options configures a Console. Client and Token are required.
type Options struct {
	// Client reaches the Redis (or Cluster) holding the queues and promotions.
	Client redis.UniversalClient
	// Redis is how the pages name that Redis (a redacted URL, or the
	// cluster seeds). Defaults to "redis".
	Redis string
	// Token unlocks changes (the login form, or a token form field).
	// Required. A login lasts only while the token is the one it was
	// made with: changing it (after a leak) ends every login.
	Token string
	// Loopback says the console listens on a loopback address only: the
	// read-only pages are then open without login, and the Host header
	// must be a loopback name (against DNS rebinding). Defaults to false:
	// every page needs the login.
	Loopback bool
	// QueuePrefix is the queues' key prefix. Defaults to delay.DefaultPrefix.
	QueuePrefix string
	// CachePrefix is the promotions' key prefix. Defaults to cache.DefaultPrefix.
	CachePrefix string
	// Queues is a fixed list of queue names. Defaults to every queue found
	// under QueuePrefix (delay.Discover), rescanned each minute.
	Queues []string
	// IDsTTL is how long a listing of promotion IDs is reused (listing
	// SCANs the keyspace). Defaults to 10s; negative lists on every request.
	IDsTTL time.Duration
	// Session is how long a login lasts at most: its absolute expiry,
	// kept with the login in Redis (under QueuePrefix), and the login
	// cookie's Max-Age. Defaults to 12h.
	Session time.Duration
	// SessionIdle ends a login not used for this long (a page read or a
	// change made under it). Defaults to 30m, and never exceeds Session.
	SessionIdle time.Duration
	// LoginsPerAddress is how many login attempts one client address
	// (an IPv6 address by its /64) may make per minute, a successful
	// login not counted; more are answered 429 with Retry-After. A
	// change carrying Token in a form field is an attempt too.
	// Defaults to 10.
	LoginsPerAddress int
	// LoginsPerMinute is the same limit for every client together.
	// Defaults to 100.
	LoginsPerMinute int
	// TrustProxy makes an X-Forwarded-Proto of https mark the cookies
	// Secure (set it only behind a proxy you run). Defaults to false.
	TrustProxy bool
	// Location is the zone the pages show times in, each with its zone's
	// name. Defaults to UTC.
	Location *time.Location
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// OptionsError is an Options field the console cannot use.
type OptionsError struct {
	Field string
	Err   error
}

func (e *OptionsError) Error() string { return "console: " + e.Field + ": " + e.Err.Error() }

func (e *OptionsError) Unwrap() error { return e.Err }

// config is Options with its defaults filled in.
type config struct {
	client      redis.UniversalClient
	redisShown  string
	token       string
	loopback    bool
	queuePrefix string
	cachePrefix string
	queues      []string
	idsTTL      time.Duration // 0: list on every request
	session     time.Duration
	idle        time.Duration
	perAddr     int // login attempts a minute, per client address
	perMinute   int // and for all clients
	trustProxy  bool
	loc         *time.Location
	now         func() time.Time
}

func (o Options) config() (config, error) {
	c := config{client: o.Client, redisShown: o.Redis, token: o.Token, loopback: o.Loopback, queuePrefix: o.QueuePrefix,
		cachePrefix: o.CachePrefix, idsTTL: o.IDsTTL, session: o.Session, idle: o.SessionIdle, perAddr: o.LoginsPerAddress,
		perMinute: o.LoginsPerMinute, trustProxy: o.TrustProxy, loc: o.Location, now: o.Now}
	if c.client == nil {
		return c, &OptionsError{"Client", errors.New("required")}
	}
	if c.token == "" {
		return c, &OptionsError{"Token", errors.New("required")}
	}
	for _, n := range o.Queues {
		if err := keyname.Check(n); err != nil {
			return c, &OptionsError{"Queues", err}
		}
	}
	c.queues = o.Queues
	if c.redisShown == "" {
		c.redisShown = "redis"
	}
	if c.queuePrefix == "" {
		c.queuePrefix = delay.DefaultPrefix
	}
	if c.cachePrefix == "" {
		c.cachePrefix = cache.DefaultPrefix
	}
	switch {
	case c.idsTTL == 0:
		c.idsTTL = 10 * time.Second
	case c.idsTTL < 0:
		c.idsTTL = 0
	}
	if c.session <= 0 {
		c.session = 12 * time.Hour
	}
	if c.idle <= 0 {
		c.idle = 30 * time.Minute
	}
	c.idle = min(c.idle, c.session)
	if c.perAddr <= 0 {
		c.perAddr = 10
	}
	if c.perMinute <= 0 {
		c.perMinute = 100
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.loc == nil {
		c.loc = time.UTC
	}
	return c, nil
}

// IsLoopback reports whether a listen host is a loopback name or address.
func IsLoopback(h string) bool {
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

// Console is the operator console: an http.Handler over the library's
// public API. New makes one.
type Console struct {
	cfg     config
	secret  []byte // keys the pre-session CSRF tokens
	limiter *loginLimiter
	tmpl    *template.Template
	mux     *http.ServeMux

	mu         sync.Mutex
	queues     []*delay.Queue
	discovered time.Time
	caches     map[int]*cache.Cache // by digit count (gradient.Digits)
	rates      map[string][]rateSample
	ids        []string
	idsAt      time.Time
	listing    bool // a background listing is running
	running    int  // filter-wide jobs running (bulk.go)
}

// New checks the options, reads the queue list and the promotion IDs
// once, and returns the console.
func New(ctx context.Context, o Options) (*Console, error) {
	cfg, err := o.config()
	if err != nil {
		return nil, err
	}
	tmpl, err := template.New("").Funcs(funcs(cfg.loc)).ParseFS(webFiles, "web/*.html")
	if err != nil {
		return nil, err
	}
	s := &Console{cfg: cfg, secret: []byte(randomHex(32)), limiter: newLoginLimiter(cfg.perAddr, cfg.perMinute), tmpl: tmpl, mux: http.NewServeMux(),
		caches: map[int]*cache.Cache{}, rates: map[string][]rateSample{}}
	if _, err := s.cacheFor(0); err != nil {
		return nil, &OptionsError{"CachePrefix", err}
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
func (s *Console) loadQueues(ctx context.Context, force bool) error {
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
		// A queue whose periodic jobs are declared before its first task
		// (an hourly job's, say) is one too.
		withJobs, err := periodic.Discover(ctx, s.cfg.client, s.cfg.queuePrefix)
		if err != nil {
			return err
		}
		for _, n := range withJobs {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	qs := make([]*delay.Queue, 0, len(names))
	for _, n := range names {
		q, err := delay.New(s.cfg.client, n, delay.Options{Prefix: s.cfg.queuePrefix})
		if err != nil {
			return &OptionsError{"Queues", fmt.Errorf("%q: %w", n, err)}
		}
		qs = append(qs, q)
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].Name() < qs[j].Name() })
	s.mu.Lock()
	s.queues, s.discovered = qs, s.cfg.now()
	s.mu.Unlock()
	return nil
}

func (s *Console) queueList(ctx context.Context) ([]*delay.Queue, error) {
	if err := s.loadQueues(ctx, false); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queues, nil
}

func (s *Console) queue(ctx context.Context, name string) (*delay.Queue, error) {
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

// namedQueue is queue for a request: the queue name names, or false
// after it showed the error page (404 for an unknown queue).
func (s *Console) namedQueue(w http.ResponseWriter, r *http.Request, name string) (*delay.Queue, bool) {
	q, err := s.queue(r.Context(), name)
	if err != nil {
		s.fail(w, r, err)
		return nil, false
	}
	return q, true
}

// cacheFor returns the Cache that encodes amount queries with minorDigits
// (a MinorDigits value, 0 for the default), as a cart of that currency
// would.
func (s *Console) cacheFor(minorDigits int) (*cache.Cache, error) {
	digits := gradient.Digits(minorDigits)
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.caches[digits]; ok {
		return c, nil
	}
	opts := cache.Options{Prefix: s.cfg.cachePrefix, MinorDigits: minorDigits, Now: s.cfg.now}
	c, err := cache.New(s.cfg.client, opts)
	if err != nil {
		return nil, err
	}
	s.caches[digits] = c
	return c, nil
}

// promotionIDs lists the stored IDs. With idsTTL > 0 a listing is reused,
// and one older than idsTTL is answered at once while a fresh one is made
// in the background (listing SCANs the whole keyspace; docs/benchmarks.md,
// "Operator console", has its cost), so only the first request waits for it.
func (s *Console) promotionIDs(ctx context.Context) ([]string, time.Time, error) {
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

func (s *Console) listIDs(ctx context.Context) ([]string, time.Time, error) {
	c, err := s.cacheFor(0)
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
