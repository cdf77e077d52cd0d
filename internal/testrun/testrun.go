// Package testrun runs a long-running Run method (a worker's, a pool's)
// in a test, for the tests of every package; it imports none of them.
package testrun

import (
	"context"
	"sync"
	"testing"
)

// Start runs run in a goroutine with a child of ctx, and returns stop,
// which cancels it and returns run's error (the same error on every
// call). Cleanup stops it too, so a test that fails midway leaves
// nothing running.
func Start(t testing.TB, ctx context.Context, run func(context.Context) error) (stop func() error) {
	t.Helper()
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(rctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}
