package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

const embeddedWarning = "tierset: warning: no -redis given: using an embedded in-memory Redis; nothing persists after this command exits"

// backend is the Redis a command talks to.
type backend struct {
	client   redis.UniversalClient
	embedded bool
	close    func()
}

// connect opens -redis: a redis:// or rediss:// URL, or comma-separated
// host:port seeds of a Redis Cluster. An empty value starts an embedded
// miniredis and prints the warning to stderr.
func connect(ctx context.Context, url string, e *env) (*backend, error) {
	if url == "" {
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			return nil, fmt.Errorf("start embedded redis: %w", err)
		}
		fmt.Fprintln(e.stderr, embeddedWarning)
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		return &backend{client: c, embedded: true, close: func() { _ = c.Close(); m.Close() }}, nil
	}
	var c redis.UniversalClient
	if strings.Contains(url, ",") {
		var addrs []string
		for _, a := range strings.Split(url, ",") {
			if a = strings.TrimSpace(a); a != "" {
				addrs = append(addrs, a)
			}
		}
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ClusterStateReloadInterval: time.Second})
	} else {
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, usagef("-redis %q: %v", url, err)
		}
		c = redis.NewClient(opt)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("redis %s: %w", url, err)
	}
	return &backend{client: c, close: func() { _ = c.Close() }}, nil
}
