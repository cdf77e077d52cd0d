//go:build unix

package redisserver

import (
	"fmt"
	"syscall"
)

// Freeze stops the process with SIGSTOP: it keeps its port and its
// connections but answers nothing, a hung server rather than a dead one
// (clients see timeouts, not refused connections). Thaw resumes it; Kill
// and Close end a frozen process too.
func (s *Server) Freeze() error { return s.signal(syscall.SIGSTOP) }

// Thaw resumes a process Freeze stopped (SIGCONT); it answers again,
// including the commands sent while it was frozen.
func (s *Server) Thaw() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	if s.proc == nil {
		return fmt.Errorf("redisserver: %v: server on port %d is not running", sig, s.port)
	}
	if err := s.proc.Signal(sig); err != nil {
		return fmt.Errorf("redisserver: %v: %w", sig, err)
	}
	return nil
}
