package main

// The hook between main and the delay-queue benchmarks (delay_run.go).

import (
	"context"
	"io"
	"path/filepath"
	"time"

	"github.com/redis/go-redis/v9"
)

// delayConfig is what main hands the delay benchmarks.
type delayConfig struct {
	Client   redis.UniversalClient
	Backend  string // miniredis, redis, cluster
	Quick    bool
	Duration time.Duration // per case (unused: each delay phase is sized by task count)
	Out      io.Writer
	CSVDir   string // "" when -csv was not given
}

// delayCSVName is the file the delay rows go to, inside CSVDir.
const delayCSVName = "bench-delay.csv"

// runDelay measures the delay queue on cfg.Client: enqueue one by one and
// batched, take+ack, lateness at 1k and 10k tasks/s, memory per pending task.
func runDelay(ctx context.Context, cfg delayConfig) error {
	p := delayParams{client: cfg.Client, backend: cfg.Backend, meaningful: cfg.Backend != "miniredis",
		quick: cfg.Quick, out: cfg.Out}
	if cfg.CSVDir != "" {
		p.csvPath = filepath.Join(cfg.CSVDir, delayCSVName)
	}
	return runDelayBench(ctx, p)
}
