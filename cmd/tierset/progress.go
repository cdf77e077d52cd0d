package main

import (
	"fmt"
	"io"
	"time"
)

// progress draws one self-overwriting line ("\r…") with count, rate and
// ETA, at most every interval, and ends it with a newline when done. It
// draws nothing when off (stdout is not a terminal), so logs and pipes
// get only the summary.
type progress struct {
	w        io.Writer
	on       bool
	label    string
	start    time.Time
	last     time.Time
	interval time.Duration
	drawn    bool
	now      func() time.Time
}

func newProgress(w io.Writer, on bool, label string) *progress {
	now := time.Now
	return &progress{w: w, on: on, label: label, start: now(), interval: 100 * time.Millisecond, now: now}
}

func (p *progress) update(done, total int) {
	if !p.on {
		return
	}
	t := p.now()
	if done < total && p.drawn && t.Sub(p.last) < p.interval {
		return
	}
	p.last, p.drawn = t, true
	elapsed := t.Sub(p.start)
	line := fmt.Sprintf("\r%s %d/%d", p.label, done, total)
	if total > 0 {
		line += fmt.Sprintf(" (%d%%)", done*100/total)
	}
	if done > 0 && elapsed > 0 {
		rate := float64(done) / elapsed.Seconds() // display only
		line += fmt.Sprintf("  %.0f/s", rate)
		if done < total {
			eta := time.Duration(float64(total-done) / rate * float64(time.Second))
			line += "  ETA " + eta.Round(time.Second).String()
		}
	}
	fmt.Fprintf(p.w, "%s\x1b[K", line)
	if done >= total {
		fmt.Fprintln(p.w)
	}
}
