package opsview

import (
	"time"

	"github.com/tierset/tierset/periodic"
)

// JobState is the one word a periodic job's state reads as: paused,
// undeclared (no live process declares it, so it does not tick),
// changing (two definitions live: a rolling schedule change) or running.
func JobState(j periodic.JobInfo) string {
	switch {
	case j.Paused:
		return "paused"
	case len(j.Definitions) == 0:
		return "undeclared"
	case j.Conflict:
		return "changing"
	}
	return "running"
}

// PeriodicJob is a periodic job as -json prints it: times in RFC 3339
// UTC (null when none), durations in ms.
type PeriodicJob struct {
	Queue        string        `json:"queue"`
	Name         string        `json:"name"`
	Spec         string        `json:"spec"`
	CatchUp      string        `json:"catch_up"`
	Paused       bool          `json:"paused"`
	PausedSince  *string       `json:"paused_since"`
	Last         *string       `json:"last_tick"`
	LastEnqueued *string       `json:"last_enqueued"`
	Next         *string       `json:"next_tick"`
	Conflict     bool          `json:"conflict"`
	Definitions  []PeriodicDef `json:"definitions"`
}

// PeriodicDef is one live definition of a job.
type PeriodicDef struct {
	Digest        string         `json:"digest"`
	Spec          string         `json:"spec"`
	CatchUp       string         `json:"catch_up"`
	MaxCatchUp    int            `json:"max_catch_up"`
	GraceMs       int64          `json:"grace_ms"`
	FirstDeclared *string        `json:"first_declared"`
	Winner        bool           `json:"winner"`
	Processes     []PeriodicProc `json:"processes"`
}

// PeriodicProc is one live process's declaration.
type PeriodicProc struct {
	Process  string  `json:"process"`
	Declared *string `json:"declared"`
	Expires  *string `json:"expires"`
}

// PeriodicJobOf is the view of j, a job of queue.
func PeriodicJobOf(queue string, j periodic.JobInfo) PeriodicJob {
	v := PeriodicJob{Queue: queue, Name: j.Name, Spec: j.Spec, CatchUp: j.CatchUp.String(), Paused: j.Paused,
		PausedSince: timeOrNull(j.PausedSince), Last: timeOrNull(j.Last), LastEnqueued: timeOrNull(j.LastEnqueued),
		Next: timeOrNull(j.Next), Conflict: j.Conflict, Definitions: []PeriodicDef{}}
	for _, d := range j.Definitions {
		dv := PeriodicDef{Digest: d.Digest, Spec: d.Spec, CatchUp: d.CatchUp.String(), MaxCatchUp: d.MaxCatchUp,
			GraceMs: d.Grace.Milliseconds(), FirstDeclared: timeOrNull(d.FirstDeclared), Winner: d.Winner, Processes: []PeriodicProc{}}
		for _, p := range d.Processes {
			dv.Processes = append(dv.Processes, PeriodicProc{Process: p.Process, Declared: timeOrNull(p.Declared), Expires: timeOrNull(p.Expires)})
		}
		v.Definitions = append(v.Definitions, dv)
	}
	return v
}

// timeOrNull is t in RFC 3339 UTC, or nil (JSON null) when zero.
func timeOrNull(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339Nano)
	return &s
}
