package faultproxy_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/testredis"
)

// TestFaultProxyCutsOneReply: the cut command ran on the server, the
// client saw an error, and the next command goes through.
func TestFaultProxyCutsOneReply(t *testing.T) {
	f := testredis.StartFaulty(t)
	p := f.Proxy
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1}) // no re-send: the cut reply is the client's error
	t.Cleanup(func() { _ = c.Close() })
	direct := f.Server.Client(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	p.CutNext(1, faultproxy.Contains("INCR"))
	if err := c.Incr(ctx, "n").Err(); err == nil {
		t.Fatal("INCR through a cut reply: want an error, got none")
	}
	if got := direct.Get(ctx, "n").Val(); got != "1" {
		t.Fatalf("the server did not run the cut command: n=%q, want 1", got)
	}
	if p.Cuts() != 1 || p.Armed() != 0 {
		t.Fatalf("cuts=%d armed=%d, want 1 and 0", p.Cuts(), p.Armed())
	}
	if v, err := c.Incr(ctx, "n").Result(); err != nil || v != 2 {
		t.Fatalf("after the cut: %v %v, want 2", v, err)
	}
}

// TestFaultProxyRetriedByGoRedis shows the fault the library must survive:
// with default options go-redis re-sends the command, so it runs twice.
func TestFaultProxyRetriedByGoRedis(t *testing.T) {
	f := testredis.StartFaulty(t)
	p, c := f.Proxy, f.Cut
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p.CutNext(1, faultproxy.Contains("INCR"))
	v, err := c.Incr(ctx, "n").Result()
	if err != nil {
		t.Fatalf("INCR with retries: %v", err)
	}
	if v != 2 {
		t.Fatalf("INCR re-sent after a lost reply returned %d, want 2 (ran twice)", v)
	}
}

func TestFaultProxyLatency(t *testing.T) {
	f := testredis.StartFaulty(t)
	p, c := f.Proxy, f.Cut
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.SetLatency(20 * time.Millisecond)
	start := time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("PING with 20 ms latency took %v", d)
	}
}
