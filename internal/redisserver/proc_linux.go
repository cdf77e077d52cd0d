package redisserver

import "syscall"

// sysProcAttr: own process group (a terminal's SIGINT goes to the parent,
// which stops the server itself) and SIGKILL when the parent dies. Go
// never ends the OS thread that started the child unless a goroutine
// locked to it exits, so Pdeathsig fires at process exit, as intended.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
