//go:build !linux

package storm

import "time"

// pacer waits for an open-loop client's due times with time.Sleep, which
// may wake up to a millisecond late (pace_linux.go says why and does
// better); the table's "late" column shows how late.
type pacer struct{ t0 time.Time }

func newPacer(t0 time.Time) (*pacer, error) { return &pacer{t0: t0}, nil }

// waitUntil returns at t0+at, or later.
func (p *pacer) waitUntil(at time.Duration) error {
	time.Sleep(time.Until(p.t0.Add(at)))
	return nil
}

func (p *pacer) close() {}
