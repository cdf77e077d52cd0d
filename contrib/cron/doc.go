// Package cron gives package periodic cron schedules, parsed by
// robfig/cron/v3, in a time zone, ticking once per local tick across
// daylight saving changes:
//
//	s, err := cron.Parse("30 2 * * *", "Europe/Berlin") // 02:30 Berlin time, daily
//	if err != nil { ... }                                // *periodic.ValidationError
//	sched.Add(periodic.Job{Name: "nightly", Schedule: s})
//
// The spec is robfig's standard one (5 fields, an optional leading
// seconds field, or a descriptor such as @daily or @every 1h); the
// location is an IANA name ("" is UTC). A bad spec is a
// *periodic.ValidationError with Field "schedule", an unknown location
// one with Field "location".
//
// Daylight saving, stated once here and tested in TestDaylightSaving:
//
//   - The repeated hour (clocks go back): a wall time that occurs twice
//     ticks once, at its first occurrence. robfig alone would tick twice.
//   - The skipped hour (clocks go forward): a wall time that does not
//     exist ticks at the end of the gap (for Europe/Berlin, a 02:30 daily
//     job runs at 03:00 CEST that day), merged into one tick with the
//     schedule's own tick at that instant if it has one (an hourly job
//     ticks once at 03:00). robfig alone would drop it.
package cron
