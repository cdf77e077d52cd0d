//go:build unix && !linux

package redisserver

import "syscall"

// sysProcAttr: own process group only; without Pdeathsig a parent killed
// by SIGKILL leaves the server running (Close and the signal handlers of
// the bench still stop it on every ordinary exit).
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
