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

// TestFaultProxyHoldsOneReply: a held command ran on the server, its
// client's deadline passes while the reply is held, and Release lets a
// later held reply through.
func TestFaultProxyHoldsOneReply(t *testing.T) {
	f := testredis.StartFaulty(t)
	p := f.Proxy
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	direct := f.Server.Client(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	p.HoldNext(1, faultproxy.Contains("INCR"))
	dctx, dcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer dcancel()
	if err := c.Incr(dctx, "n").Err(); err == nil {
		t.Fatal("INCR past its deadline behind a held reply: want an error, got none")
	}
	if got := direct.Get(ctx, "n").Val(); got != "1" {
		t.Fatalf("the server did not run the held command: n=%q, want 1", got)
	}
	if v, err := c.Incr(ctx, "n").Result(); err != nil || v != 2 {
		t.Fatalf("after the hold: %v %v, want 2", v, err)
	}

	p.HoldNext(1, faultproxy.Contains("INCR"))
	done := make(chan error, 1)
	go func() { done <- c.Incr(ctx, "n").Err() }()
	deadline := time.Now().Add(5 * time.Second)
	for p.Holding() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the reply was never held")
		}
		time.Sleep(time.Millisecond)
	}
	p.Release()
	if err := <-done; err != nil {
		t.Fatalf("INCR after Release: %v", err)
	}
}
