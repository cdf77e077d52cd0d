package delay

import (
	"sync"
	"sync/atomic"
	"time"
)

// clockDriftDiv: a held offset sample is assumed to lose accuracy at
// 1/clockDriftDiv of its age, 1 ms per second (1000 ppm), well above the
// drift of a disciplined clock, so a fresher sample replaces an old one
// within seconds.
const clockDriftDiv = 1000

// clockEst estimates Redis TIME minus the client clock from the TIME every
// script reply carries. Each reply bounds the offset: the script ran
// between the call's send and its reply, in the server millisecond it
// returned, so the offset lies in [ms - recv, ms + 1 ms - sent]. Under
// load that interval is wide and lopsided (a reply that waited behind
// other work looks like a server clock running behind), and taking its
// middle every time made the estimate jump by ±5 ms, which a worker's
// timer turned straight into lateness. So the estimate is the middle of
// the narrowest recent interval: a new sample replaces the held one when
// it is at least as narrow as the held one grown by its age at
// 1000 ppm, or when the two intervals do not overlap (a clock was
// stepped: the held sample no longer describes the clocks).
type clockEst struct {
	off  atomic.Int64 // ns
	mu   sync.Mutex
	set  bool
	half time.Duration // the held sample's half-width
	at   time.Time     // when it was taken (client clock)
}

func (c *clockEst) observe(nowMs int64, sent, recv time.Time) {
	if nowMs <= 0 {
		return
	}
	server := time.UnixMilli(nowMs)
	lo, hi := server.Sub(recv), server.Add(time.Millisecond).Sub(sent)
	off, half := (lo+hi)/2, (hi-lo)/2
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.set {
		grown := c.half + max(0, recv.Sub(c.at))/clockDriftDiv
		held := time.Duration(c.off.Load())
		if half > grown && (off-held).Abs() <= grown+half {
			return
		}
	}
	c.set, c.half, c.at = true, half, recv
	c.off.Store(int64(off))
}

func (c *clockEst) offset() time.Duration { return time.Duration(c.off.Load()) }
