// Package redisserver starts private redis-server processes on a free
// loopback port with no persistence: for tests that kill or reconfigure a
// server, for the test suites' fallback when no TIERSET_REDIS_URL is set,
// and for `go run ./bench`. Only processes started here are ever stopped.
package redisserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNoServer is returned when redis-server is not on PATH.
var ErrNoServer = errors.New("redisserver: redis-server not on PATH")

// Have reports whether redis-server is on PATH.
func Have() bool {
	_, err := exec.LookPath("redis-server")
	return err == nil
}

// Server is one redis-server process this package started.
type Server struct {
	port    int
	dir     string
	ownDir  bool
	args    []string
	proc    *os.Process
	exited  chan struct{} // closed once the process was reaped
	version string
}

// Start starts redis-server on a free loopback port with --save "" and
// --appendonly no, followed by args (which may override them), in dir ("":
// a fresh temporary directory that Close removes), and waits up to 10 s
// for PING. The process is in its own process group, so a terminal's
// Ctrl-C reaches only its parent, and on Linux it gets SIGKILL when its
// parent dies (Pdeathsig), so a killed test binary or bench leaves no
// server behind.
func Start(ctx context.Context, dir string, args ...string) (*Server, error) {
	if !Have() {
		return nil, ErrNoServer
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("redisserver: free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &Server{port: port, dir: dir, args: args}
	if dir == "" {
		if s.dir, err = os.MkdirTemp("", "tierset-redis-"); err != nil {
			return nil, fmt.Errorf("redisserver: %w", err)
		}
		s.ownDir = true
	}
	if err := s.Start(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Addr is host:port of the server.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL is the redis:// URL of DB 0.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Dir is the server's working directory (AOF and RDB files live there).
func (s *Server) Dir() string { return s.dir }

// Version is the server's redis_version, read at the last Start.
func (s *Server) Version() string { return s.version }

// Start (re)starts the process with the same port, directory and args and
// waits up to 10 s for PING.
func (s *Server) Start(ctx context.Context) error {
	argv := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log")}, s.args...)
	cmd := exec.Command("redis-server", argv...)
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redisserver: start redis-server: %w", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	s.proc, s.exited = cmd.Process, exited
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err := c.Ping(pctx).Err()
		cancel()
		// NOAUTH is an answer too: the server is up and wants a password
		// (--requirepass).
		if err != nil && strings.HasPrefix(err.Error(), "NOAUTH") {
			return nil
		}
		if err == nil {
			s.version = Version(ctx, c)
			return nil
		}
		select {
		case <-exited:
			s.proc = nil
			return fmt.Errorf("redisserver: redis-server on port %d exited before answering PING (%v); see %s",
				s.port, waitErr, filepath.Join(s.dir, "redis.log"))
		default:
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("redisserver: redis-server on port %d did not answer PING in 10 s: %w", s.port, errors.Join(ctx.Err(), err))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Kill stops the process with SIGKILL (a crash, not a shutdown) and waits
// for it to exit. Killing a stopped server does nothing.
func (s *Server) Kill() {
	if s.proc == nil {
		return
	}
	_ = s.proc.Kill()
	<-s.exited
	s.proc = nil
}

// Restart kills the process and starts it again on the same port.
func (s *Server) Restart(ctx context.Context) error {
	s.Kill()
	return s.Start(ctx)
}

// Close kills the process and removes the directory Start made.
func (s *Server) Close() {
	s.Kill()
	if s.ownDir {
		_ = os.RemoveAll(s.dir)
	}
}

// Version reads redis_version from INFO server of c, "?" if unknown.
func Version(ctx context.Context, c redis.Cmdable) string {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "redis_version:"); ok {
			return v
		}
	}
	return "?"
}
