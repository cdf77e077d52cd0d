package redisserver

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestStartKillRestart: a started server answers on its port, a killed one
// does not, a restarted one answers on the same port, and Close removes
// the directory Start made.
func TestStartKillRestart(t *testing.T) {
	if !Have() {
		t.Skip("redis-server not on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Start(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("fresh server: %v", err)
	}
	if s.Version() == "?" || s.Version() == "" {
		t.Errorf("version %q", s.Version())
	}
	s.Kill()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("killed server still answers")
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("restarted server: exists=%d err=%v (no persistence: want 0, nil)", n, err)
	}
	dir := s.Dir()
	s.Close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("Close left %s: %v", dir, err)
	}
	if _, err := Start(ctx, dir+"/missing/nested"); err == nil {
		t.Fatal("Start in a missing directory succeeded")
	}
}

// TestFreezeThaw: a frozen server keeps its port but answers nothing (a
// command times out rather than being refused); thawed, it answers again.
func TestFreezeThaw(t *testing.T) {
	if !Have() {
		t.Skip("redis-server not on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Start(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("fresh server: %v", err)
	}
	if err := s.Freeze(); err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err = c.Ping(pctx).Err()
	pcancel()
	if err == nil || strings.Contains(err.Error(), "refused") {
		t.Fatalf("frozen server: PING gave %v, want a timeout", err)
	}
	if err := s.Thaw(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("thawed server: %v", err)
	}
}
