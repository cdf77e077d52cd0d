package testredis

import (
	"io"
	"os/exec"
	"testing"
)

// StartChild starts cmd, a child process of the test, and kills and reaps
// it at cleanup, so a test that fails midway leaves no process behind.
func StartChild(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
}

// StartChildPipe is StartChild for a child the test reads from: pipe is
// cmd.StdoutPipe or cmd.StderrPipe (it must be made before the start), and
// its reader is returned.
func StartChildPipe(t testing.TB, cmd *exec.Cmd, pipe func() (io.ReadCloser, error)) io.ReadCloser {
	t.Helper()
	r, err := pipe()
	if err != nil {
		t.Fatal(err)
	}
	StartChild(t, cmd)
	return r
}
