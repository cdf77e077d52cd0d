package testredis

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server this test started on a free loopback port.
// Only this process is ever stopped or restarted; the shared server is
// never touched.
type Server struct {
	t    testing.TB
	port int
	dir  string
	args []string
	cmd  *exec.Cmd
}

// HaveServer reports whether redis-server is on PATH.
func HaveServer() bool {
	_, err := exec.LookPath("redis-server")
	return err == nil
}

// StartServer starts a private redis-server with no persistence, plus
// any extra config args (for example "--appendonly", "yes"), and stops it
// at cleanup. It skips, saying why, when redis-server is not on PATH.
func StartServer(t testing.TB, args ...string) *Server {
	t.Helper()
	if !HaveServer() {
		t.Skip("redis-server not on PATH: this test needs a private server it can stop")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &Server{t: t, port: port, dir: t.TempDir(), args: args}
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// Addr is host:port of the server.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Dir is the server's working directory (AOF and RDB files live there).
func (s *Server) Dir() string { return s.dir }

// Start (re)starts the process with the same port, directory and args,
// and waits, up to 10 s, for PING.
func (s *Server) Start() {
	s.t.Helper()
	argv := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log")}, s.args...)
	s.cmd = exec.Command("redis-server", argv...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("testredis: start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		// NOAUTH is an answer: the server is up and wants a password
		// (--requirepass).
		if err == nil || strings.HasPrefix(err.Error(), "NOAUTH") {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("testredis: redis-server on %d did not answer PING in 10 s: %v", s.port, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Kill stops the process with SIGKILL (a crash, not a shutdown).
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart kills the process and starts it again on the same port.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.Start()
}

// Client returns a client for the server with the given options (Addr is
// filled in, and ContextTimeoutEnabled set, as cache.New and delay.New
// require), closed at cleanup.
func (s *Server) Client(opt *redis.Options) *redis.Client {
	if opt == nil {
		opt = &redis.Options{}
	}
	o := *opt
	o.Addr = s.Addr()
	o.ContextTimeoutEnabled = true
	c := redis.NewClient(&o)
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}
