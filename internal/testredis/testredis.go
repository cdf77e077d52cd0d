// Package testredis gives every test suite of the module the same three
// backends: an embedded miniredis (always), the real Redis at
// TIERSET_REDIS_URL, and the Redis Cluster at TIERSET_REDIS_CLUSTER
// (comma-separated seed addresses). Each backend comes with a key prefix
// unique to the test, and real servers are cleaned of that prefix with a
// fresh context in t.Cleanup. Nothing here ever FLUSHes a server.
package testredis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/tierset/tierset"
)

// Environment variables that switch on the real backends.
const (
	EnvURL     = "TIERSET_REDIS_URL"
	EnvCluster = "TIERSET_REDIS_CLUSTER"
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
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return &Backend{Name: NameMini, Client: c, Mini: m, Prefix: Prefix(t)}
}

// URL returns TIERSET_REDIS_URL, or "" when unset.
func URL() string { return os.Getenv(EnvURL) }

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
		t.Skipf("%s not set", EnvURL)
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("testredis: %s=%q: %v", EnvURL, url, err)
	}
	opt.ContextTimeoutEnabled = true // as cache.New and delay.New require
	c := redis.NewClient(opt)
	b := &Backend{Name: NameRedis, Client: c, Prefix: Prefix(t)}
	ping(t, c)
	t.Cleanup(func() {
		cleanup(t, c, b.Prefix)
		_ = c.Close()
	})
	return b
}

// Cluster returns a backend on the cluster at TIERSET_REDIS_CLUSTER, or skips.
func Cluster(t testing.TB) *Backend {
	t.Helper()
	addrs := ClusterAddrs()
	if len(addrs) == 0 {
		t.Skipf("%s not set", EnvCluster)
	}
	// The suites use the settings the library ships, so they are what is tested.
	c := tierset.NewClusterClient(addrs...)
	b := &Backend{Name: NameCluster, Client: c, Prefix: Prefix(t)}
	ping(t, c)
	t.Cleanup(func() {
		cleanup(t, c, b.Prefix)
		_ = c.Close()
	})
	return b
}

func ping(t testing.TB, c redis.UniversalClient) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("testredis: ping: %v", err)
	}
}

// Each runs fn as a subtest per available backend: backend=miniredis
// always, backend=redis and backend=cluster when their variables are set.
func Each(t *testing.T, fn func(t *testing.T, b *Backend)) {
	t.Helper()
	t.Run("backend="+NameMini, func(t *testing.T) { fn(t, Mini(t)) })
	if URL() != "" {
		t.Run("backend="+NameRedis, func(t *testing.T) { fn(t, Redis(t)) })
	}
	if len(ClusterAddrs()) > 0 {
		t.Run("backend="+NameCluster, func(t *testing.T) { fn(t, Cluster(t)) })
	}
}

// EachReal is Each without miniredis: for Lua semantics, score parsing and
// anything else miniredis does not model faithfully. It skips when no real
// backend is configured.
func EachReal(t *testing.T, fn func(t *testing.T, b *Backend)) {
	t.Helper()
	if URL() == "" && len(ClusterAddrs()) == 0 {
		t.Skipf("neither %s nor %s set", EnvURL, EnvCluster)
	}
	if URL() != "" {
		t.Run("backend="+NameRedis, func(t *testing.T) { fn(t, Redis(t)) })
	}
	if len(ClusterAddrs()) > 0 {
		t.Run("backend="+NameCluster, func(t *testing.T) { fn(t, Cluster(t)) })
	}
}

// eachKey calls fn for every key under prefix, with the node that holds
// it: on every master of a cluster (concurrently, so fn must be safe for
// that), on the one server otherwise.
func eachKey(ctx context.Context, c redis.UniversalClient, prefix string, fn func(ctx context.Context, node redis.Cmdable, key string) error) error {
	scan := func(ctx context.Context, node redis.Cmdable) error {
		iter := node.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			if err := fn(ctx, node, iter.Val()); err != nil {
				return err
			}
		}
		return iter.Err()
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	}
	return scan(ctx, c)
}

// cleanup deletes every key under prefix, on every master of a cluster.
func cleanup(t testing.TB, c redis.UniversalClient, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := eachKey(ctx, c, prefix, func(ctx context.Context, node redis.Cmdable, key string) error {
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
	var mu sync.Mutex
	var out []string
	err := eachKey(ctx, c, prefix, func(_ context.Context, _ redis.Cmdable, key string) error {
		mu.Lock()
		out = append(out, key)
		mu.Unlock()
		return nil
	})
	return out, err
}
