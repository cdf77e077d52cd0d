//go:build linux

package storm

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// pacer waits for an open-loop client's due times. On Linux it arms a
// timerfd at the absolute due time and reads it through the runtime's
// poller: time.Sleep rounds a wait shorter than a millisecond up to one
// when the process is idle (the poller's epoll timeout is in
// milliseconds), which would charge the harness's lateness to the carts
// it times. A timerfd wakes the poller at the time it was set for.
type pacer struct {
	f     *os.File
	fd    int
	t0    time.Time
	mono0 int64 // CLOCK_MONOTONIC at t0, ns
}

func newPacer(t0 time.Time) (*pacer, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	// Go's monotonic clock is CLOCK_MONOTONIC: t0 in its terms is a
	// reading of it minus the time since t0, taken before the reading,
	// so that a goroutine preempted between the two makes mono0 late,
	// never early. The narrowest of a few brackets is the best estimate.
	var mono0 int64
	window := time.Duration(-1)
	for range 8 {
		var ts unix.Timespec
		before := time.Since(t0)
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			unix.Close(fd)
			return nil, err
		}
		if w := time.Since(t0) - before; window < 0 || w < window {
			window, mono0 = w, ts.Nano()-int64(before)
		}
	}
	return &pacer{f: os.NewFile(uintptr(fd), "timerfd"), fd: fd, t0: t0, mono0: mono0}, nil
}

// waitUntil returns at t0+at, or just after.
func (p *pacer) waitUntil(at time.Duration) error {
	for time.Since(p.t0) < at {
		its := unix.ItimerSpec{Value: unix.NsecToTimespec(p.mono0 + int64(at))}
		if err := unix.TimerfdSettime(p.fd, unix.TFD_TIMER_ABSTIME, &its, nil); err != nil {
			return err
		}
		var n [8]byte // the expiration count
		if _, err := p.f.Read(n[:]); err != nil {
			return err
		}
	}
	return nil
}

func (p *pacer) close() { p.f.Close() }
