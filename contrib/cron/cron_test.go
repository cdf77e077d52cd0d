package cron

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tierset/tierset/periodic"
)

// ticks is the wall times (with zone) of the first n ticks after from.
func ticks(t *testing.T, s periodic.Schedule, loc *time.Location, from time.Time, n int) []string {
	t.Helper()
	var out []string
	for x := from; len(out) < n; {
		next := s.Next(x)
		if !next.After(x) {
			t.Fatalf("Next(%v) = %v: does not advance", x, next)
		}
		x = next
		out = append(out, x.In(loc).Format("01-02 15:04 MST"))
	}
	return out
}

// A cron schedule in a location ticks once per local tick across both
// daylight saving changes: the repeated hour ticks once (its first
// occurrence), a tick in the skipped hour runs at the end of the gap,
// merged with the schedule's own tick there. Time is given, not read.
func TestDaylightSaving(t *testing.T) {
	rows := []struct {
		name, spec, loc string
		from            time.Time // UTC
		want            string
	}{
		{"Berlin spring, daily in the skipped hour", "30 2 * * *", "Europe/Berlin", time.Date(2026, 3, 27, 12, 0, 0, 0, time.UTC),
			"03-28 02:30 CET, 03-29 03:00 CEST, 03-30 02:30 CEST"},
		{"Berlin spring, hourly", "0 * * * *", "Europe/Berlin", time.Date(2026, 3, 28, 23, 30, 0, 0, time.UTC),
			"03-29 01:00 CET, 03-29 03:00 CEST, 03-29 04:00 CEST"},
		{"Berlin spring, every 20 minutes", "*/20 * * * *", "Europe/Berlin", time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC),
			"03-29 01:40 CET, 03-29 03:00 CEST, 03-29 03:20 CEST"},
		{"Berlin autumn, daily in the repeated hour", "30 2 * * *", "Europe/Berlin", time.Date(2026, 10, 23, 12, 0, 0, 0, time.UTC),
			"10-24 02:30 CEST, 10-25 02:30 CEST, 10-26 02:30 CET"},
		{"Berlin autumn, hourly", "0 * * * *", "Europe/Berlin", time.Date(2026, 10, 24, 22, 30, 0, 0, time.UTC),
			"10-25 01:00 CEST, 10-25 02:00 CEST, 10-25 03:00 CET, 10-25 04:00 CET"},
		{"Berlin autumn, daily outside the change", "30 1 * * *", "Europe/Berlin", time.Date(2026, 10, 23, 12, 0, 0, 0, time.UTC),
			"10-24 01:30 CEST, 10-25 01:30 CEST, 10-26 01:30 CET"},
		{"New York spring, daily in the skipped hour", "30 2 * * *", "America/New_York", time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC),
			"03-08 03:00 EDT, 03-09 02:30 EDT"},
		{"New York autumn, 01:30 repeated", "30 1 * * *", "America/New_York", time.Date(2026, 10, 31, 12, 0, 0, 0, time.UTC),
			"11-01 01:30 EDT, 11-02 01:30 EST"},
		{"UTC has no change", "0 2 * * *", "", time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC),
			"03-29 02:00 UTC, 03-30 02:00 UTC"},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			s, err := Parse(r.spec, r.loc)
			if err != nil {
				t.Fatal(err)
			}
			loc, _ := time.LoadLocation(r.loc)
			want := strings.Split(r.want, ", ")
			if got := ticks(t, s, loc, r.from, len(want)); strings.Join(got, ", ") != r.want {
				t.Fatalf("ticks %q\nwant  %q", strings.Join(got, ", "), r.want)
			}
		})
	}
}

// A bad spec or an unknown location is a *periodic.ValidationError
// naming it.
func TestParseBadInput(t *testing.T) {
	rows := []struct{ spec, loc, field string }{
		{"61 * * * *", "", "schedule"},
		{"not a spec", "", "schedule"},
		{"", "", "schedule"},
		{"CRON_TZ=Europe/Paris 0 * * * *", "", "schedule"},
		{"0 * * * *", "Mars/Olympus_Mons", "location"},
	}
	for _, r := range rows {
		_, err := Parse(r.spec, r.loc)
		if !errors.Is(err, &periodic.ValidationError{Field: r.field}) || !errors.Is(err, periodic.ErrInvalid) {
			t.Errorf("Parse(%q, %q): %v, want a ValidationError of %q", r.spec, r.loc, err, r.field)
		}
	}
}
