//go:build unix

package measure

import (
	"syscall"
	"time"
)

// ProcessCPU is this process's CPU time so far, user and system, garbage
// collection included; ok is false where getrusage is missing or fails.
func ProcessCPU() (d time.Duration, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
