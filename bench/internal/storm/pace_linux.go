//go:build linux

package storm

import (
	"os"
	"syscall"
	"time"
	"unsafe"
)

// pacer waits for an open-loop client's due times. On Linux it arms a
// timerfd at the absolute due time and reads it through the runtime's
// poller: time.Sleep rounds a wait shorter than a millisecond up to one
// when the process is idle (the poller's epoll timeout is in
// milliseconds), which would charge the harness's lateness to the carts
// it times. A timerfd wakes the poller at the time it was set for. The
// calls go through syscall, not golang.org/x/sys, which the core module
// does not require.
type pacer struct {
	f     *os.File
	fd    int
	t0    time.Time
	mono0 int64 // CLOCK_MONOTONIC at t0, ns
}

const (
	clockMonotonic  = 1                                      // CLOCK_MONOTONIC
	tfdTimerAbstime = 1                                      // TFD_TIMER_ABSTIME
	tfdFlags        = syscall.O_NONBLOCK | syscall.O_CLOEXEC // TFD_NONBLOCK | TFD_CLOEXEC
)

// itimerspec is struct itimerspec.
type itimerspec struct {
	interval, value syscall.Timespec
}

func newPacer(t0 time.Time) (*pacer, error) {
	fd, _, errno := syscall.Syscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic, tfdFlags, 0)
	if errno != 0 {
		return nil, os.NewSyscallError("timerfd_create", errno)
	}
	// Go's monotonic clock is CLOCK_MONOTONIC: t0 in its terms is a
	// reading of it minus the time since t0, taken before the reading,
	// so that a goroutine preempted between the two makes mono0 late,
	// never early. The narrowest of a few brackets is the best estimate.
	var mono0 int64
	window := time.Duration(-1)
	for range 8 {
		var ts syscall.Timespec
		before := time.Since(t0)
		if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
			syscall.Close(int(fd))
			return nil, os.NewSyscallError("clock_gettime", errno)
		}
		if w := time.Since(t0) - before; window < 0 || w < window {
			window, mono0 = w, ts.Nano()-int64(before)
		}
	}
	return &pacer{f: os.NewFile(fd, "timerfd"), fd: int(fd), t0: t0, mono0: mono0}, nil
}

// waitUntil returns at t0+at, or just after.
func (p *pacer) waitUntil(at time.Duration) error {
	for time.Since(p.t0) < at {
		its := itimerspec{value: syscall.NsecToTimespec(p.mono0 + int64(at))}
		if _, _, errno := syscall.Syscall6(syscall.SYS_TIMERFD_SETTIME, uintptr(p.fd), tfdTimerAbstime, uintptr(unsafe.Pointer(&its)), 0, 0, 0); errno != 0 {
			return os.NewSyscallError("timerfd_settime", errno)
		}
		var n [8]byte // the expiration count
		if _, err := p.f.Read(n[:]); err != nil {
			return err
		}
	}
	return nil
}

func (p *pacer) close() { p.f.Close() }
