package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset"
	"github.com/tierset/tierset/internal/redisconf"
	"github.com/tierset/tierset/internal/redisserver"
)

// backend is the connected server.
type backend struct {
	name    string // miniredis, redis, cluster
	note    string // the first line of the output: what and why
	url     string // for -peers; "" on miniredis and clusters
	client  redis.UniversalClient
	private *redisserver.Server // started by this run, nil otherwise
	close   func()
}

// connect picks the backend: -cluster, -redis, -miniredis, else a private
// redis-server when one is on PATH, else miniredis.
func connect(ctx context.Context, cfg config) (*backend, error) {
	switch {
	case len(cfg.clusterSeed) > 0:
		// The options the library ships for clusters (1 s slot-map reload).
		c := tierset.NewClusterClient(cfg.clusterSeed...)
		if err := c.Ping(ctx).Err(); err != nil {
			c.Close()
			return nil, fmt.Errorf("cluster %s: %w", strings.Join(cfg.clusterSeed, ","), err)
		}
		var masters atomic.Int32
		if err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			masters.Add(1)
			return m.Ping(ctx).Err()
		}); err != nil {
			c.Close()
			return nil, fmt.Errorf("cluster: %w", err)
		}
		return &backend{name: "cluster", client: c, close: func() { c.Close() },
			note: fmt.Sprintf("Redis Cluster %s, %d masters, seeds %s (-cluster)", redisserver.Version(ctx, c), masters.Load(), strings.Join(cfg.clusterSeed, ","))}, nil
	case cfg.redisURL != "":
		opt, err := redis.ParseURL(cfg.redisURL)
		if err != nil {
			return nil, fmt.Errorf("-redis %s: %w", redisconf.Redact(cfg.redisURL), err)
		}
		opt.ContextTimeoutEnabled = true // the library refuses a client that ignores ctx deadlines
		c := redis.NewClient(opt)
		if err := c.Ping(ctx).Err(); err != nil {
			c.Close()
			return nil, fmt.Errorf("redis %s: %w", opt.Addr, err)
		}
		return &backend{name: "redis", client: c, url: cfg.redisURL, close: func() { c.Close() },
			note: fmt.Sprintf("Redis %s at %s db %d (-redis); other clients of that server add noise", redisserver.Version(ctx, c), opt.Addr, opt.DB)}, nil
	case !cfg.mini && redisserver.Have():
		s, err := redisserver.Start(ctx, "")
		if err != nil {
			return nil, err
		}
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
		return &backend{name: "redis", client: c, url: s.URL(), private: s, close: func() { c.Close(); s.Close() },
			note: fmt.Sprintf("Redis %s, a private redis-server on %s started by this run (redis-server is on PATH; no persistence; killed at exit)", s.Version(), s.Addr())}, nil
	default:
		why := "redis-server is not on PATH"
		if cfg.mini {
			why = "-miniredis"
		}
		m, err := miniredis.Run()
		if err != nil {
			return nil, fmt.Errorf("embedded miniredis: %w", err)
		}
		c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
		return &backend{name: "miniredis", client: c, close: func() { c.Close(); m.Close() },
			note: fmt.Sprintf("miniredis, embedded in this process (%s): timing floors are not judged (miniredis is not Redis); round trips and bytes per lookup are", why)}, nil
	}
}
