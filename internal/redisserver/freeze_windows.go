package redisserver

import "errors"

// errNoFreeze: Windows has no SIGSTOP.
var errNoFreeze = errors.New("redisserver: Freeze and Thaw need SIGSTOP (unix only)")

// Freeze would stop the process; Windows has no SIGSTOP.
func (s *Server) Freeze() error { return errNoFreeze }

// Thaw would resume a frozen process; Windows has no SIGSTOP.
func (s *Server) Thaw() error { return errNoFreeze }
