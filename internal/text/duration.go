package text

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Day is the unit Duration prints past 48 hours and ParseDuration reads
// as "d": 24 hours, whatever the calendar does.
const Day = 24 * time.Hour

// Duration prints d for a person: at most two units, so an age of years
// reads "2531d11h" rather than "60748h23m4.026s". Under a second it keeps
// milliseconds, under a minute tenths of a second; each form is accepted
// back by ParseDuration (and, but for "d", by time.ParseDuration).
func Duration(d time.Duration) string {
	neg := d < 0
	if neg {
		if d == time.Duration(-1<<63) {
			d++ // -d would overflow; a nanosecond does not show
		}
		d = -d
	}
	var s string
	switch {
	case d < time.Second:
		s = d.Round(time.Millisecond).String()
	case d < time.Minute:
		s = strconv.FormatFloat(d.Round(100*time.Millisecond).Seconds(), 'f', -1, 64) + "s"
		if s == "60s" {
			s = "1m"
		}
	default:
		s = twoUnits(d)
	}
	if neg && s != "0s" {
		s = "-" + s
	}
	return s
}

// twoUnits prints d ≥ 1m as its two largest units, the second rounded;
// a rounding that reaches the next unit prints in that unit ("1h", not
// "60m").
func twoUnits(d time.Duration) string {
	big, small, bn, sn := time.Minute, time.Second, "m", "s"
	switch {
	case d >= 48*time.Hour:
		big, small, bn, sn = Day, time.Hour, "d", "h"
	case d >= time.Hour:
		big, small, bn, sn = time.Hour, time.Minute, "h", "m"
	}
	r := d.Round(small)
	if big != Day && (r >= 48*time.Hour || big == time.Minute && r >= time.Hour) {
		return twoUnits(r)
	}
	n, rest := r/big, (r%big)/small
	if rest == 0 {
		return fmt.Sprintf("%d%s", n, bn)
	}
	return fmt.Sprintf("%d%s%d%s", n, bn, rest, sn)
}

// ParseDuration reads a duration as time.ParseDuration does, and also
// with days ("3d", "2d4h", "1.5d"), so what Duration prints is accepted
// back. It refuses what would overflow.
func ParseDuration(s string) (time.Duration, error) {
	i := strings.IndexByte(s, 'd')
	if i < 0 {
		return time.ParseDuration(s)
	}
	days, rest := s[:i], s[i+1:]
	neg := strings.HasPrefix(days, "-")
	if neg || strings.HasPrefix(days, "+") {
		days = days[1:]
	}
	n, err := strconv.ParseFloat(days, 64)
	if err != nil || days == "" || strings.ContainsAny(days, "eEinIN") || n < 0 {
		return 0, fmt.Errorf("time: invalid duration %s", strconv.Quote(s))
	}
	var tail time.Duration
	if rest != "" {
		if strings.HasPrefix(rest, "-") || strings.HasPrefix(rest, "+") {
			return 0, fmt.Errorf("time: invalid duration %s", strconv.Quote(s))
		}
		if tail, err = time.ParseDuration(rest); err != nil {
			return 0, fmt.Errorf("time: invalid duration %s", strconv.Quote(s))
		}
	}
	total := n*float64(Day) + float64(tail)
	if total >= 1<<63 {
		return 0, fmt.Errorf("time: invalid duration %s (too long)", strconv.Quote(s))
	}
	d := time.Duration(total)
	if neg {
		d = -d
	}
	return d, nil
}
