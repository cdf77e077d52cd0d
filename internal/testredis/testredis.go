// Package testredis gives every test suite of the module the same three
// backends: an embedded miniredis (always), a real Redis, and the Redis
// Cluster at TIERSET_REDIS_CLUSTER (comma-separated seed addresses). The
// real Redis is the one at TIERSET_REDIS_URL or, when that is unset and
// redis-server is on PATH, a private server the test binary starts on
// first use (see URL), so a machine with Redis installed runs the
// real-Redis tests with no setup. Each backend comes with a key prefix
// unique to the test, and real servers are cleaned of that prefix with a
// fresh context in t.Cleanup. Nothing here ever FLUSHes a server.
package testredis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/tierset/tierset"
	"github.com/tierset/tierset/internal/keyscan"
	"github.com/tierset/tierset/internal/redisconf"
	"github.com/tierset/tierset/internal/redisserver"
)

// Environment variables that switch on the real backends.
const (
	EnvURL     = redisconf.EnvURL // the tools read it too
	EnvCluster = "TIERSET_REDIS_CLUSTER"
	// EnvNoServer=1 turns the private-server fallback off (miniredis only
	// unless EnvURL is set).
	EnvNoServer = "TIERSET_NO_REDIS_SERVER"
)

// Backend names, used in subtest names as backend=<name>.
const (
	NameMini    = "miniredis"
	NameRedis   = "redis"
	NameCluster = "cluster"
)

// Backend is one Redis a test runs against.
type Backend struct {
	Name   string
	Client redis.UniversalClient
	// Mini is the embedded server, nil on real backends. Tests drive
	// Redis TIME with Mini.SetTime.
	Mini *miniredis.Miniredis
	// Prefix is unique to this test; use it as the key prefix.
	Prefix string
}

// Real reports whether the backend is a real Redis server (single or cluster).
func (b *Backend) Real() bool { return b.Mini == nil }

// IsCluster reports whether the backend is a Redis Cluster.
func (b *Backend) IsCluster() bool { return b.Name == NameCluster }

// Prefix returns a key prefix unique to t and to this process.
func Prefix(t testing.TB) string {
	t.Helper()
	var buf [6]byte
	if _, err := rand.Read(buf[:]); err != nil {
		t.Fatalf("testredis: random prefix: %v", err)
	}
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, t.Name())
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return "tstest-" + name + "-" + hex.EncodeToString(buf[:])
}

// Mini returns a backend on a fresh embedded miniredis, closed at cleanup.
func Mini(t testing.TB) *Backend {
	t.Helper()
	m := miniredis.RunT(t)
	// miniredis sorts a whole set on every ZRANGE: a cart over 3000-tier
	// promotions under -race on a busy machine can outlast go-redis's 3 s
	// default read timeout, which would fail the test on CPU, not on Redis.
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true, ReadTimeout: 30 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return &Backend{Name: NameMini, Client: c, Mini: m, Prefix: Prefix(t)}
}

// fallback is the private redis-server of this test binary.
var fallback struct {
	once sync.Once
	srv  *redisserver.Server
	why  string // why there is none
}

// URL returns TIERSET_REDIS_URL. When that is unset and redis-server is on
// PATH (and TIERSET_NO_REDIS_SERVER is not 1), it returns the URL of a
// private redis-server (no persistence, free loopback port) started on the
// first call: one per test binary, shared by its tests like the shared
// server (each test under its own prefix). Nothing stops it explicitly: it
// runs with Pdeathsig, so the kernel kills it when the test binary exits,
// however it exits. "" when no real server is available; NoRealWhy says why.
func URL() string {
	if u := os.Getenv(EnvURL); u != "" {
		return u
	}
	fallback.once.Do(func() {
		switch {
		case os.Getenv(EnvNoServer) == "1":
			fallback.why = EnvNoServer + "=1"
		case !redisserver.Have():
			fallback.why = "redis-server not on PATH"
		default:
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			// Logs to the discarded stdout; with no persistence nothing is written to dir.
			srv, err := redisserver.Start(ctx, os.TempDir(), "--logfile", "")
			if err != nil {
				fallback.why = "private redis-server: " + err.Error()
				return
			}
			fallback.srv = srv
		}
	})
	if fallback.srv == nil {
		return ""
	}
	return fallback.srv.URL()
}

// ChildEnv is this process's environment plus kv, for a test binary it
// re-executes: the child reaches the same real Redis, the private server
// this process started included, not one of its own.
func ChildEnv(kv ...string) []string {
	env := os.Environ()
	if u := URL(); u != "" {
		env = append(env, EnvURL+"="+u)
	}
	return append(env, kv...)
}

// NoRealWhy says why URL is "", for a skip message.
func NoRealWhy() string {
	return fmt.Sprintf("no real Redis: %s unset and %s", EnvURL, fallback.why)
}

// ClusterAddrs returns the seed addresses in TIERSET_REDIS_CLUSTER, or nil.
func ClusterAddrs() []string {
	v := strings.TrimSpace(os.Getenv(EnvCluster))
	if v == "" {
		return nil
	}
	var out []string
	for _, a := range strings.Split(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// Redis returns a backend on the real server at TIERSET_REDIS_URL, or skips.
func Redis(t testing.TB) *Backend {
	t.Helper()
	url := URL()
	if url == "" {
		t.Skip(NoRealWhy())
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("testredis: %s=%q: %v", EnvURL, url, err)
	}
	opt.ContextTimeoutEnabled = true // as cache.New and delay.New require
	return attach(t, NameRedis, redis.NewClient(opt))
}

// Cluster returns a backend on the cluster at TIERSET_REDIS_CLUSTER, or skips.
func Cluster(t testing.TB) *Backend {
	t.Helper()
	addrs := ClusterAddrs()
	if len(addrs) == 0 {
		t.Skipf("%s not set", EnvCluster)
	}
	// The suites use the settings the library ships, so they are what is tested.
	return attach(t, NameCluster, tierset.NewClusterClient(addrs...))
}

// attach is backend name on the real server(s) behind c, under a fresh
// prefix: it pings c, and at cleanup deletes the prefix's keys and
// closes c.
func attach(t testing.TB, name string, c redis.UniversalClient) *Backend {
	t.Helper()
	b := &Backend{Name: name, Client: c, Prefix: Prefix(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("testredis: ping: %v", err)
	}
	t.Cleanup(func() {
		cleanup(t, c, b.Prefix)
		_ = c.Close()
	})
	return b
}

// Each runs fn as a subtest per available backend: backend=miniredis
// always, backend=redis when URL finds a real server, backend=cluster
// when TIERSET_REDIS_CLUSTER is set.
func Each(t *testing.T, fn func(t *testing.T, b *Backend)) {
	t.Helper()
	t.Run("backend="+NameMini, func(t *testing.T) { fn(t, Mini(t)) })
	eachReal(t, fn)
}

// EachCtx is Each with the subtest's context (Ctx) handed to fn: the
// opening almost every backend test starts with.
func EachCtx(t *testing.T, fn func(t *testing.T, ctx context.Context, b *Backend)) {
	t.Helper()
	Each(t, func(t *testing.T, b *Backend) { fn(t, Ctx(t), b) })
}

// EachReal is Each without miniredis: for Lua semantics, score parsing and
// anything else miniredis does not model faithfully. It skips, saying
// why, when there is no real backend (see URL).
func EachReal(t *testing.T, fn func(t *testing.T, b *Backend)) {
	t.Helper()
	if URL() == "" && len(ClusterAddrs()) == 0 {
		t.Skipf("%s, and %s unset", NoRealWhy(), EnvCluster)
	}
	eachReal(t, fn)
}

// eachReal runs fn as a subtest on each real backend there is.
func eachReal(t *testing.T, fn func(t *testing.T, b *Backend)) {
	t.Helper()
	if URL() != "" {
		t.Run("backend="+NameRedis, func(t *testing.T) { fn(t, Redis(t)) })
	}
	if len(ClusterAddrs()) > 0 {
		t.Run("backend="+NameCluster, func(t *testing.T) { fn(t, Cluster(t)) })
	}
}

// EachRealCtx is EachReal with the subtest's context (Ctx) handed to fn.
func EachRealCtx(t *testing.T, fn func(t *testing.T, ctx context.Context, b *Backend)) {
	t.Helper()
	EachReal(t, func(t *testing.T, b *Backend) { fn(t, Ctx(t), b) })
}

// cleanup deletes every key under prefix, on every master of a cluster.
func cleanup(t testing.TB, c redis.UniversalClient, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := keyscan.Each(ctx, c, prefix+"*", func(ctx context.Context, node redis.Cmdable, key string) error {
		return node.Del(ctx, key).Err()
	})
	if err != nil {
		t.Logf("testredis: cleanup of %s*: %v", prefix, err)
	}
}

// CountKeys counts the keys under prefix (on every master of a cluster).
func CountKeys(ctx context.Context, c redis.UniversalClient, prefix string) (int, error) {
	keys, err := Keys(ctx, c, prefix)
	return len(keys), err
}

// Keys lists the keys under prefix (on every master of a cluster).
func Keys(ctx context.Context, c redis.UniversalClient, prefix string) ([]string, error) {
	return keyscan.Keys(ctx, c, prefix+"*")
}
