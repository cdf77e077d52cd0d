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
// `go run ./bench` runs from.
const peersDir = "bench/peers"

// runPeers runs bench/peers (tierset vs asynq, its own module so asynq
// never enters tierset's go.mod) through the go command on the same
// Redis, streams its output, and returns its floor rows.
func runPeers(ctx context.Context, url string, quick bool, stdout, stderr io.Writer) ([]measure.Floor, error) {
	if _, err := os.Stat(filepath.Join(peersDir, "go.mod")); err != nil {
		return nil, fmt.Errorf("-peers: %s/go.mod not found: run from the repository root (%w)", peersDir, err)
	}
	out, err := os.CreateTemp("", "tierset-peers-*.json")
	if err != nil {
		return nil, err
	}
	out.Close()
	defer os.Remove(out.Name())
	args := []string{"run", ".", "-redis", url, "-floors", out.Name()}
	if quick {
		args = append(args, "-steady", "2s")
	}
	fmt.Fprintf(stdout, "\npeers: go %v (in %s)\n", args, peersDir)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = peersDir, stdout, stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("bench/peers: %w", err)
	}
	data, err := os.ReadFile(out.Name())
	if err != nil {
		return nil, err
	}
	return measure.ReadJSON(data)
}
