package cron

import (
	"fmt"
	"strings"
	"time"

	rc "github.com/robfig/cron/v3"

	"github.com/tierset/tierset/periodic"
)

var parser = rc.NewParser(rc.SecondOptional | rc.Minute | rc.Hour | rc.Dom | rc.Month | rc.Dow | rc.Descriptor)

// Parse returns the schedule of spec in location.
func Parse(spec, location string) (periodic.Schedule, error) {
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, &periodic.ValidationError{Field: "schedule",
			Detail: fmt.Sprintf("%q: give the time zone as the location, not in the spec", spec)}
	}
	loc, err := time.LoadLocation(location)
	if err != nil {
		return nil, &periodic.ValidationError{Field: "location",
			Detail: fmt.Sprintf("%q: %v", location, err), Cause: err}
	}
	inner, err := parser.Parse(spec)
	if err != nil {
		return nil, &periodic.ValidationError{Field: "schedule",
			Detail: fmt.Sprintf("%q: %v", spec, err), Cause: err}
	}
	s := &schedule{text: spec, loc: loc, inner: inner}
	if fs, ok := inner.(*rc.SpecSchedule); ok {
		fs.Location = loc
		s.fields = fs
	}
	return s, nil
}

type schedule struct {
	text  string
	loc   *time.Location
	inner rc.Schedule
	// fields is set for a field schedule (not @every), the one kind
	// daylight saving changes
	fields *rc.SpecSchedule
}

func (s *schedule) String() string { return s.text + " (" + s.loc.String() + ")" }

// Next is robfig's next tick after t, without the second occurrence of a
// repeated wall time, and with the end of a forward gap when the gap
// hides a tick.
func (s *schedule) Next(t time.Time) time.Time {
	for range 1000 { // a repeat is skipped at most once per transition
		n := s.inner.Next(t)
		if s.fields == nil {
			return n
		}
		if g, ok := s.gapTick(t, n); ok {
			return g
		}
		if n.IsZero() || !s.repeated(n) {
			return n
		}
		t = n
	}
	return time.Time{}
}

// repeated reports whether n is the second occurrence of its wall time:
// it lies within the first (old offset - new offset) after a transition
// that turned the clocks back.
func (s *schedule) repeated(n time.Time) bool {
	n = n.In(s.loc)
	start, _ := n.ZoneBounds()
	if start.IsZero() {
		return false
	}
	_, now := n.Zone()
	_, before := start.Add(-time.Nanosecond).Zone()
	back := time.Duration(before-now) * time.Second
	return back > 0 && n.Before(start.Add(back))
}

// gapTick finds a forward transition in (t, n] (n zero: within a year)
// whose skipped wall times hold a tick of the spec, and returns the
// transition instant: the skipped tick runs there.
func (s *schedule) gapTick(t, n time.Time) (time.Time, bool) {
	limit := n
	if limit.IsZero() {
		limit = t.AddDate(1, 0, 0)
	}
	for x := t.In(s.loc); ; {
		_, end := x.ZoneBounds()
		if end.IsZero() || end.After(limit) {
			return time.Time{}, false
		}
		_, before := x.Zone()
		_, after := end.Zone()
		if gap := after - before; gap > 0 && end.After(t) {
			// the wall times [end in the old offset, end in the new one)
			// do not exist; the spec in the old fixed offset tells
			// whether one of them is a tick
			fixed := *s.fields
			fixed.Location = time.FixedZone("", before)
			if w := fixed.Next(end.Add(-time.Nanosecond)); w.Before(end.Add(time.Duration(gap)*time.Second)) && !w.Before(end) {
				return end, true
			}
		}
		x = end
	}
}
