package testredis

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/redisserver"
)

// Server is a redis-server this test started on a free loopback port.
// Only this process is ever stopped or restarted; the shared server is
// never touched.
type Server struct {
	t testing.TB
	*redisserver.Server
}

// HaveServer reports whether redis-server is on PATH.
func HaveServer() bool { return redisserver.Have() }

// StartServer starts a private redis-server with no persistence, plus
// any extra config args (for example "--appendonly", "yes"), and stops it
// at cleanup. It skips, saying why, when redis-server is not on PATH.
func StartServer(t testing.TB, args ...string) *Server {
	t.Helper()
	if !HaveServer() {
		t.Skip("redis-server not on PATH: this test needs a private server it can stop")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	rs, err := redisserver.Start(ctx, t.TempDir(), args...)
	if err != nil {
		t.Fatalf("testredis: %v", err)
	}
	s := &Server{t: t, Server: rs}
	t.Cleanup(s.Kill)
	return s
}

// Start (re)starts the process with the same port, directory and args,
// and waits, up to 10 s, for PING.
func (s *Server) Start() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := s.Server.Start(ctx); err != nil {
		s.t.Fatalf("testredis: %v", err)
	}
}

// Restart kills the process and starts it again on the same port.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.Start()
}

// Client returns a client for the server with the given options (Addr and
// ContextTimeoutEnabled are set), closed at cleanup.
func (s *Server) Client(opt *redis.Options) *redis.Client {
	if opt == nil {
		opt = &redis.Options{}
	}
	o := *opt
	o.Addr = s.Addr()
	o.ContextTimeoutEnabled = true // cache.New and delay.New refuse a client without it
	c := redis.NewClient(&o)
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// Freeze stops the server with SIGSTOP (a hung server: connections stay
// open, nothing answers) until Thaw, or the test's end.
func (s *Server) Freeze() {
	s.t.Helper()
	if err := s.Server.Freeze(); err != nil {
		s.t.Fatalf("testredis: %v", err)
	}
	s.t.Cleanup(func() { _ = s.Server.Thaw() })
}

// Thaw resumes a server Freeze stopped.
func (s *Server) Thaw() {
	s.t.Helper()
	if err := s.Server.Thaw(); err != nil {
		s.t.Fatalf("testredis: %v", err)
	}
}
