//go:build !unix

package measure

import "time"

// ProcessCPU is this process's CPU time so far; ok is false here: the
// platform has no getrusage.
func ProcessCPU() (d time.Duration, ok bool) { return 0, false }
