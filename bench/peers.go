package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/tierset/tierset/internal/measure"
)

// peersDir is the nested module, relative to the repository root that
// `go run ./bench` runs from. It holds the comparisons that need other
// libraries (asynq, River, pgx, BullMQ's Node script), so that none of
// them enters tierset's go.mod.
const peersDir = "bench/peers"

// peerArgs is what -peers runs: the CI-sized comparison. It is judged
// against each peer's tuned settings only (-defaults=false), in 2
// interleaved rounds of 2 s steady workloads, so the step stays within
// a few minutes; `cd bench/peers && go run .` is the full table with each
// peer's defaults too (docs/benchmarks.md).
func peerArgs(quick, full bool) []string {
	switch {
	case full:
		return nil
	case quick:
		return []string{"-defaults=false", "-rounds", "1", "-steady", "2s", "-wait", "5s"}
	}
	return []string{"-defaults=false", "-rounds", "2", "-steady", "2s", "-wait", "5s"}
}

// runPeers runs bench/peers (tierset vs asynq, BullMQ and River) on the
// same Redis, streams its output, and returns its floor rows.
func runPeers(ctx context.Context, url string, quick, full bool, stdout, stderr io.Writer) ([]measure.Floor, error) {
	return runNested(ctx, ".", append([]string{"-redis", url}, peerArgs(quick, full)...), stdout, stderr)
}

// runService runs bench/peers/cart (the cart priced by PostgreSQL and by
// tierset) and bench/peers/budgetpg (a promotion cap kept in one
// PostgreSQL row and by package budget) on the same Redis and returns
// their floor rows.
func runService(ctx context.Context, url string, quick bool, stdout, stderr io.Writer) ([]measure.Floor, error) {
	args := []string{"-redis", url}
	if quick {
		args = append(args, "-rounds", "1", "-d", "500ms")
	}
	rows, err := runNested(ctx, "./cart", args, stdout, stderr)
	if err != nil {
		return nil, err
	}
	more, err := runNested(ctx, "./budgetpg", args, stdout, stderr)
	return append(rows, more...), err
}

// runNested runs `go run pkg args -floors <file>` in peersDir and reads
// the floor rows the program wrote.
func runNested(ctx context.Context, pkg string, args []string, stdout, stderr io.Writer) ([]measure.Floor, error) {
	if _, err := os.Stat(filepath.Join(peersDir, "go.mod")); err != nil {
		return nil, fmt.Errorf("%s/go.mod not found: run from the repository root (%w)", peersDir, err)
	}
	out, err := os.CreateTemp("", "tierset-peers-*.json")
	if err != nil {
		return nil, err
	}
	out.Close()
	defer os.Remove(out.Name())
	args = append(append([]string{"run", pkg}, args...), "-floors", out.Name())
	fmt.Fprintf(stdout, "\n%s: go %v (in %s)\n", pkg, args, peersDir)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = peersDir, stdout, stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s/%s: %w", peersDir, pkg, err)
	}
	data, err := os.ReadFile(out.Name())
	if err != nil {
		return nil, err
	}
	return measure.ReadJSON(data)
}
