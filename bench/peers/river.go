package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverArgs is one task: the business key (its uniqueness, as the other
// libraries dedupe on it) and the same 16-byte payload.
type riverArgs struct {
	Key     string `json:"k" river:"unique"`
	Payload []byte `json:"p"`
}

func (riverArgs) Kind() string { return "tsbench_noop" }

func (riverArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

type riverWorker struct {
	river.WorkerDefaults[riverArgs]
	deliver func([]byte)
}

func (w *riverWorker) Work(_ context.Context, job *river.Job[riverArgs]) error {
	w.deliver(job.Args.Payload)
	return nil
}

// riverWorkers is River's worker count in both configurations: River
// fetches at most as many jobs per fetch as it has free workers, and its
// README's example uses 100.
const riverWorkers = 100

// riverPeer runs riverqueue/river on PostgreSQL through pgx, in a schema of
// its own that it migrates at the start and drops at the end.
type riverPeer struct {
	label    string
	pool     *pgxpool.Pool
	schema   string
	fast     bool
	inserter *river.Client[pgx.Tx]
	worker   *river.Client[pgx.Tx]
	logger   *slog.Logger
}

func newRiverPeer(ctx context.Context, pool *pgxpool.Pool, schema, label string, fast bool) (*riverPeer, error) {
	p := &riverPeer{label: label, pool: pool, schema: schema, fast: fast,
		logger: slog.New(slog.NewTextHandler(riverLog(), &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return nil, fmt.Errorf("river: create schema: %w", err)
	}
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema, Logger: p.logger})
	if err != nil {
		return nil, errors.Join(err, p.cleanup(ctx))
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, errors.Join(fmt.Errorf("river: migrate: %w", err), p.cleanup(ctx))
	}
	p.inserter, err = river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: schema, Logger: p.logger})
	if err != nil {
		return nil, errors.Join(err, p.cleanup(ctx))
	}
	return p, nil
}

func (p *riverPeer) name() string    { return p.label }
func (p *riverPeer) product() string { return "River" }

func (p *riverPeer) settings() string {
	s := fmt.Sprintf("1 client, MaxWorkers %d, MaxAttempts 1, unique by the business key, ", riverWorkers)
	if p.fast {
		return s + "FetchCooldown 1ms (its minimum), FetchPollInterval 10ms"
	}
	return s + "FetchCooldown 100ms, FetchPollInterval 1s (defaults)"
}

func (p *riverPeer) insertOpts(t task) *river.InsertOpts {
	return &river.InsertOpts{ScheduledAt: t.due}
}

func (p *riverPeer) enqueue(ctx context.Context, t task) error {
	_, err := p.inserter.Insert(ctx, riverArgs{Key: t.key, Payload: t.payload}, p.insertOpts(t))
	return err
}

// enqueueMany uses InsertMany, 1,000 jobs a call.
func (p *riverPeer) enqueueMany(ctx context.Context, ts []task) error {
	for len(ts) > 0 {
		params := make([]river.InsertManyParams, min(len(ts), 1000))
		for i := range params {
			params[i] = river.InsertManyParams{Args: riverArgs{Key: ts[i].key, Payload: ts[i].payload}, InsertOpts: p.insertOpts(ts[i])}
		}
		res, err := p.inserter.InsertMany(ctx, params)
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.UniqueSkippedAsDuplicate {
				return fmt.Errorf("river: job %d skipped as a duplicate", r.Job.ID)
			}
		}
		ts = ts[len(params):]
	}
	return nil
}

func (p *riverPeer) start(ctx context.Context, deliver func([]byte)) error {
	workers := river.NewWorkers()
	river.AddWorker(workers, &riverWorker{deliver: deliver})
	cfg := &river.Config{
		Schema:  p.schema,
		Logger:  p.logger,
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: riverWorkers}},
		Workers: workers,
	}
	if p.fast {
		cfg.FetchCooldown, cfg.FetchPollInterval = river.FetchCooldownMin, 10*time.Millisecond
	}
	c, err := river.NewClient(riverpgxv5.New(p.pool), cfg)
	if err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	p.worker = c
	return p.awaitLeader(ctx, c.ID())
}

// awaitLeader waits until the client is River's leader: only the leader
// runs the scheduler that makes scheduled jobs available, so until then
// no scheduled job can run, however long the worker has been up.
func (p *riverPeer) awaitLeader(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	q := "SELECT leader_id FROM " + pgx.Identifier{p.schema, "river_leader"}.Sanitize()
	for {
		var leader string
		err := p.pool.QueryRow(ctx, q).Scan(&leader)
		if err == nil && leader == id {
			return nil
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("river: leader: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("river: client %s not elected leader: %w", id, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (p *riverPeer) stop() {
	if p.worker == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = p.worker.Stop(ctx)
	p.worker = nil
}

// footprint is the size of River's job table with its indexes and TOAST
// (pg_total_relation_size): where a pending job lives.
func (p *riverPeer) footprint(ctx context.Context) (int64, string, error) {
	var b int64
	err := p.pool.QueryRow(ctx, "SELECT pg_total_relation_size($1::regclass)", p.schema+".river_job").Scan(&b)
	return b, "PostgreSQL pg_total_relation_size(river_job): table, indexes and TOAST", err
}

func (p *riverPeer) reset(ctx context.Context) error {
	p.stop()
	_, err := p.pool.Exec(ctx, "TRUNCATE "+pgx.Identifier{p.schema, "river_job"}.Sanitize())
	return err
}

func (p *riverPeer) cleanup(ctx context.Context) error {
	p.stop()
	_, err := p.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{p.schema}.Sanitize()+" CASCADE")
	return err
}

func riverLog() io.Writer {
	if os.Getenv("PEERS_RIVER_LOG") != "" {
		return os.Stderr
	}
	return io.Discard
}
