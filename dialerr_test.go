package tierset_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset"
	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/testredis"
)

// TestFaultDialErrorKept: with Redis down, a cache Match and delay calls
// under a 50 ms ctx end in an error that still matches
// context.DeadlineExceeded and now also names the refused dial. The rows
// without KeepDialErrors show the fault: the bare deadline, no cause.
func TestFaultDialErrorKept(t *testing.T) {
	t.Parallel()
	type call struct {
		name string
		// prep runs once with Redis up (for a stopped server), to leave
		// pooled connections that die with it; run is the judged call.
		run func(ctx context.Context, c redis.UniversalClient, prefix string) error
	}
	calls := []call{
		{"cache Match", func(ctx context.Context, c redis.UniversalClient, prefix string) error {
			ca, err := cache.New(c, cache.Options{Prefix: prefix})
			if err != nil {
				return err
			}
			_, err = ca.Match(ctx, cache.QuantityQuery("p1", 3), cache.MatchOptions{})
			return err
		}},
		{"delay Enqueue", func(ctx context.Context, c redis.UniversalClient, prefix string) error {
			q, err := delay.New(c, "orders", delay.Options{Prefix: prefix})
			if err != nil {
				return err
			}
			_, err = q.Enqueue(ctx, delay.Job{Key: "k1", When: delay.After(time.Minute)})
			return err
		}},
		{"delay Stats", func(ctx context.Context, c redis.UniversalClient, prefix string) error {
			q, err := delay.New(c, "orders", delay.Options{Prefix: prefix})
			if err != nil {
				return err
			}
			_, err = q.Stats(ctx)
			return err
		}},
	}
	targets := []struct {
		name string
		// client returns a client on a Redis that is down by the time
		// it returns, and whether the test needs a private server.
		client func(t *testing.T, opt *redis.Options, prefix string, prep func(context.Context, redis.UniversalClient, string) error) *redis.Client
	}{
		{"closed port", func(t *testing.T, opt *redis.Options, prefix string, _ func(context.Context, redis.UniversalClient, string) error) *redis.Client {
			o := *opt
			o.Addr = testredis.ClosedAddr(t)
			o.ContextTimeoutEnabled = true
			c := redis.NewClient(&o)
			t.Cleanup(func() { _ = c.Close() })
			return c
		}},
		{"stopped server", func(t *testing.T, opt *redis.Options, prefix string, prep func(context.Context, redis.UniversalClient, string) error) *redis.Client {
			s := testredis.StartServer(t)
			c := s.Client(opt)
			ctx, cancel := context.WithTimeout(testredis.Ctx(t), 5*time.Second)
			defer cancel()
			// A first call while the server is up: its connections stay
			// in the pool and are dead once the server is gone.
			if err := prep(ctx, c, prefix); err != nil && !errors.Is(err, cache.ErrNotFound) {
				t.Fatalf("call with the server up: %v", err)
			}
			s.Kill()
			return c
		}},
	}
	for _, tg := range targets {
		for _, cl := range calls {
			for _, keep := range []bool{true, false} {
				name := tg.name + "/" + cl.name + "/plain"
				if keep {
					name = tg.name + "/" + cl.name + "/KeepDialErrors"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					prefix := testredis.Prefix(t)
					hook := func(c *redis.Client) {
						if keep {
							if err := tierset.KeepDialErrors(c); err != nil {
								t.Fatal(err)
							}
						}
					}
					c := tg.client(t, &redis.Options{}, prefix, func(ctx context.Context, c redis.UniversalClient, p string) error {
						return cl.run(ctx, c, p)
					})
					hook(c)
					// The first call's ctx outlives the first dial even on a
					// loaded machine (a call whose ctx ends before any dial
					// failed has nothing to add); the 50 ms calls after it
					// find the pool's dial errors counted, a path of its own
					// in go-redis.
					for i, budget := range []time.Duration{time.Second, 50 * time.Millisecond, 50 * time.Millisecond} {
						ctx, cancel := context.WithTimeout(testredis.Ctx(t), budget)
						err := cl.run(ctx, c, prefix)
						cancel()
						if !errors.Is(err, context.DeadlineExceeded) {
							t.Fatalf("call %d (%v): %v; want context.DeadlineExceeded", i, budget, err)
						}
						named := strings.Contains(err.Error(), "connection refused")
						var op *net.OpError
						if keep && (!named || !errors.As(err, &op) || op.Op != "dial") {
							t.Errorf("call %d (%v) with KeepDialErrors: %q (as *net.OpError: %v); want the refused dial named", i, budget, err, op)
						}
						if !keep && named && budget < time.Second {
							t.Errorf("call %d (%v) without the hook named the dial: %q; the hook may be needless now", i, budget, err)
						}
					}
				})
			}
		}
	}
}

// TestKeepDialErrorsClientTypes: only a *redis.Client is hooked; any other
// client is a typed refusal, not a silent no-op.
func TestKeepDialErrorsClientTypes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		c    redis.UniversalClient
		ok   bool
	}{
		{"client", redis.NewClient(&redis.Options{Addr: testredis.ClosedAddr(t)}), true},
		{"cluster", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{testredis.ClosedAddr(t)}}), false},
		{"ring", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": testredis.ClosedAddr(t)}}), false},
	}
	for _, tt := range tests {
		t.Cleanup(func() { _ = tt.c.Close() })
		err := tierset.KeepDialErrors(tt.c)
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, tierset.ErrUnsupportedClient)) {
			t.Errorf("%s: KeepDialErrors = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

// TestFaultDialErrorClearedByRedial: once a dial succeeds again, a call
// whose ctx ends for another reason is not blamed on the dial error from
// before. A call with a ctx already cancelled ends in the ctx error at
// once whatever the server does: it names the dial error while the
// server is down, and not once a dial got through again.
func TestFaultDialErrorClearedByRedial(t *testing.T) {
	t.Parallel()
	s := testredis.StartServer(t)
	c := s.Client(nil)
	if err := tierset.KeepDialErrors(c); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(testredis.Ctx(t))
	cancel()
	s.Kill()
	ctx, cancel := context.WithTimeout(testredis.Ctx(t), time.Second)
	err := c.Ping(ctx).Err()
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "last dial error") {
		t.Fatalf("ping with the server stopped: %v; want the dial error named", err)
	}
	if err := c.Ping(cancelled).Err(); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "last dial error") {
		t.Fatalf("cancelled ping with the server stopped: %v; want the dial error named", err)
	}
	s.Start()
	// go-redis stops dialing after PoolSize failures and probes in the
	// background, once a second: poll until a ping gets through.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(testredis.Ctx(t), time.Second)
		err = c.Ping(ctx).Err()
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ping through 10 s after the restart: %v", err)
		}
	}
	if err := c.Ping(cancelled).Err(); !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "last dial error") {
		t.Errorf("cancelled ping after a good dial: %v; want context.Canceled without a dial error", err)
	}
}
