package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// bullmqDir holds bench.mjs, package.json and the committed
// package-lock.json; `npm ci` there installs the pinned BullMQ.
const bullmqDir = "bullmq"

// bullmqPeer runs BullMQ (Node) through bullmq/bench.mjs, one process per
// workload, on the same Redis under a key prefix of its own.
type bullmqPeer struct {
	label  string
	node   string
	url    string
	rdb    *redis.Client
	prefix string
	fast   bool
}

// bullmqMissing says why BullMQ cannot run here, or "" when it can.
func bullmqMissing(node string) string {
	if _, err := exec.LookPath(node); err != nil {
		return fmt.Sprintf("%s not found on PATH", node)
	}
	if _, err := os.Stat(filepath.Join(bullmqDir, "node_modules", "bullmq", "package.json")); err != nil {
		return "bench/peers/bullmq/node_modules has no bullmq: run `npm ci` in bench/peers/bullmq"
	}
	return ""
}

func (p *bullmqPeer) name() string    { return p.label }
func (p *bullmqPeer) product() string { return "BullMQ" }

func (p *bullmqPeer) settings() string {
	s := fmt.Sprintf("1 Worker, concurrency %d, jobId = business key, ", handlers)
	if p.fast {
		return s + "removeOnComplete and removeOnFail true (auto-removal); BullMQ has no polling interval to lower: a delayed job's marker wakes the worker"
	}
	return s + "defaults (completed jobs kept, drainDelay 5 s)"
}

// bullmqOut is what bench.mjs prints.
type bullmqOut struct {
	Enqueued    int        `json:"enqueued"`
	EnqueueLate bool       `json:"enqueueLate"`
	OfferedRate float64    `json:"offeredRate"`
	Handled     [][3]int64 `json:"handled"` // task number, lateness µs, handled at (µs since the Unix epoch)
}

func (p *bullmqPeer) runNode(ctx context.Context, args map[string]any) (bullmqOut, error) {
	args["redis"], args["prefix"], args["queue"] = p.url, p.prefix, "q"
	args["concurrency"], args["removeOnComplete"] = handlers, p.fast
	js, err := json.Marshal(args)
	if err != nil {
		return bullmqOut{}, err
	}
	cmd := exec.CommandContext(ctx, p.node, "bench.mjs", string(js))
	var stdout, stderr bytes.Buffer
	cmd.Dir, cmd.Stdout, cmd.Stderr = bullmqDir, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return bullmqOut{}, fmt.Errorf("node bench.mjs %s: %w: %s", args["phase"], err, strings.TrimSpace(stderr.String()))
	}
	var out bullmqOut
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return bullmqOut{}, fmt.Errorf("node bench.mjs %s: %w", args["phase"], err)
	}
	return out, nil
}

func (p *bullmqPeer) phase(out bullmqOut, first uint64, want int) phase {
	rec := newRecorder(first, want)
	for _, h := range out.Handled {
		if h[0] < 0 {
			rec.mu.Lock()
			rec.bad++
			rec.mu.Unlock()
			continue
		}
		rec.record(uint64(h[0]), time.Duration(h[1])*time.Microsecond, time.UnixMicro(h[2]))
	}
	return phase{lat: rec.summary(), want: want, enqueueLate: out.EnqueueLate, offered: out.OfferedRate}
}

// round runs each workload in a process of its own: a BullMQ Worker is
// ready within milliseconds (waitUntilReady), so nothing of its start-up
// lands in a lateness.
func (p *bullmqPeer) round(ctx context.Context, w workload, rates []int) (phase, []phase, error) {
	defer p.reset(ctx)
	out, err := p.runNode(ctx, map[string]any{"phase": "burst", "run": w.run, "first": w.first, "n": w.n,
		"leadMs": w.burstLead.Milliseconds(), "waitMs": w.wait.Milliseconds()})
	if err != nil {
		return phase{}, nil, err
	}
	burst := p.phase(out, w.first, w.n)
	if err := p.reset(ctx); err != nil {
		return phase{}, nil, err
	}
	first := w.first + uint64(w.n)
	var steady []phase
	for _, rate := range rates {
		out, err := p.runNode(ctx, map[string]any{"phase": "steady", "run": w.run, "first": first, "rate": rate,
			"durationMs": w.length.Milliseconds(), "leadMs": w.lead.Milliseconds(), "waitMs": w.wait.Milliseconds()})
		if err != nil {
			return phase{}, nil, err
		}
		steady = append(steady, p.phase(out, first, w.steadyWant(rate)))
		first += uint64(w.steadyWant(rate))
		if err := p.reset(ctx); err != nil {
			return phase{}, nil, err
		}
	}
	return burst, steady, nil
}

func (p *bullmqPeer) memory(ctx context.Context, w workload) (float64, string, error) {
	defer p.reset(ctx)
	if err := p.reset(ctx); err != nil {
		return 0, "", err
	}
	b0, _, err := usedMemory(ctx, p.rdb)
	if err != nil {
		return 0, "", err
	}
	out, err := p.runNode(ctx, map[string]any{"phase": "fill", "run": w.run, "first": w.first, "n": w.memN})
	if err != nil {
		return 0, "", err
	}
	if out.Enqueued != w.memN {
		return 0, "", fmt.Errorf("bullmq fill: %d of %d enqueued", out.Enqueued, w.memN)
	}
	b1, what, err := usedMemory(ctx, p.rdb)
	return float64(b1-b0) / float64(w.memN), what, err
}

func (p *bullmqPeer) reset(ctx context.Context) error {
	_, err := deleteKeys(ctx, p.rdb, p.prefix+":*")
	return err
}

func (p *bullmqPeer) cleanup(ctx context.Context) error {
	return errors.Join(p.reset(ctx))
}
