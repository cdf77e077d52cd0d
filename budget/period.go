package budget

import (
	"strconv"
	"time"
)

// bounds is the period holding t in loc: [start, end). time.Date
// normalises across DST, so a day is 23, 24 or 25 hours as the zone says.
func bounds(p Period, loc *time.Location, t time.Time) (start, end time.Time) {
	y, m, d := t.In(loc).Date()
	switch p {
	case Day:
		return time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	case Week:
		back := (int(t.In(loc).Weekday()) + 6) % 7 // days since Monday
		return time.Date(y, m, d-back, 0, 0, 0, 0, loc), time.Date(y, m, d-back+7, 0, 0, 0, 0, loc)
	default: // Month
		return time.Date(y, m, 1, 0, 0, 0, 0, loc), time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
	}
}

// periodLetter names a period in key suffixes.
var periodLetter = [...]string{Ever: "", Day: "d", Week: "w", Month: "m"}

// cand is a counter key suffix and the span of Redis TIME it counts.
type cand struct {
	suffix     string
	start, end int64 // ms
}

// candidates are the counter keys a cap may count in at about now: for a
// period cap, the period holding now and those on either side, so the
// script, judging by Redis TIME, finds its period among them even when
// this process's estimate of Redis TIME is off by up to a period.
func candidates(promo string, c Cap, now time.Time) []cand {
	base := "c:" + promo
	if c.Period == Ever {
		return []cand{{suffix: base, start: 0, end: forever}}
	}
	s, e := bounds(c.Period, c.Location, now)
	ps, _ := bounds(c.Period, c.Location, s.Add(-time.Nanosecond))
	_, ne := bounds(c.Period, c.Location, e)
	mk := func(s, e time.Time) cand {
		// The start in Unix seconds names the period in its zone: two
		// zones' days are two keys, one zone's day one key.
		return cand{suffix: base + ":" + periodLetter[c.Period] + strconv.FormatInt(s.Unix(), 10), start: s.UnixMilli(), end: e.UnixMilli()}
	}
	return []cand{mk(ps, s), mk(s, e), mk(e, ne)}
}

// field is the counter field of a cap: "u" or "s", and "@<attr>=<value>"
// for a cap per attribute.
func field(c Cap, attrs map[string]string) string {
	f := "u"
	if c.Measure == Spend {
		f = "s"
	}
	if c.Per != "" {
		f += "@" + c.Per + "=" + attrs[c.Per]
	}
	return f
}
