// Package soak is the repository's one switch for long tests: runs of
// 100k tasks, SIGKILL loops, multi-process rate and pause runs, fault
// schedules and anything that needs a quiet machine. They run when
// TIERSET_SOAK=1 (as .ci/run and `make soak` set it); the README's test
// command leaves them out, so the edit loop stays short while every
// guarantee keeps a fast test.
package soak

import (
	"os"
	"testing"
)

// Env is the switch: "1" runs the soak tests.
const Env = "TIERSET_SOAK"

// On reports whether the soak tests run.
func On() bool { return os.Getenv(Env) == "1" }

// Require skips t unless the soak switch is on; what says what the test
// does that makes it a soak, and is printed in the skip.
func Require(t testing.TB, what string) {
	t.Helper()
	if !On() {
		t.Skipf("soak (%s); set %s=1 to run it", what, Env)
	}
}

// Pick returns full when the soak switch is on and fast otherwise: the
// same test with the same assertions, at the size the edit loop can
// afford (fewer tasks, runs or rounds) by default.
func Pick[T any](full, fast T) T {
	if On() {
		return full
	}
	return fast
}
