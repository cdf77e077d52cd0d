package redisserver

import "syscall"

// sysProcAttr: nothing to set; Close stops the server on ordinary exits.
func sysProcAttr() *syscall.SysProcAttr { return nil }
