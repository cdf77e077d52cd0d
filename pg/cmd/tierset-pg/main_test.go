package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shopspring/decimal"
	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/pg"
	"github.com/tierset/tierset/pg/internal/pgtest"
	"github.com/tierset/tierset/rules"
)

// syncBuffer is a bytes.Buffer safe for a writer goroutine and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls out until it contains want, failing after 10 s.
func waitFor(t *testing.T, out *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output within 10 s:\n%s", want, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func runCLI(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(t.Context(), args, &out, &errOut)
	return code, out.String() + errOut.String()
}

func TestUsageErrors(t *testing.T) {
	t.Setenv(testredis.EnvURL, "") // no silent default: warm without -redis must refuse
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "Usage"},
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"no source", []string{"warm"}, "-source is required"},
		{"no redis", []string{"warm", "-source", "postgres://x/y"}, "-redis (or $TIERSET_REDIS_URL) is required"},
		{"watch with dry-run", []string{"warm", "-source", "postgres://x/y", "-watch", "-dry-run"}, "do not go together"},
		{"bad flag", []string{"warm", "-nope"}, "flag provided but not defined"},
		{"stray argument", []string{"migrate", "-source", "postgres://x/y", "extra"}, "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := runCLI(t, tt.args...)
			if code != 2 || !strings.Contains(out, tt.want) {
				t.Fatalf("exit %d, output %q; want 2 and %q", code, out, tt.want)
			}
		})
	}
}

// seeded migrates a fresh schema through the CLI and saves the example
// promotions; it returns the source URL (with a password, which trust
// auth ignores, to check it is never printed) and the schema.
func seeded(t *testing.T) (string, string) {
	t.Helper()
	url, schema, _ := seededPool(t)
	return url, schema
}

func seededPool(t *testing.T) (string, string, *pgxpool.Pool) {
	t.Helper()
	pool, schema := pgtest.Schema(t)
	url := strings.Replace(pgtest.URL(t), "postgres@", "postgres:s3cret@", 1)
	if code, out := runCLI(t, "migrate", "-source", url, "-schema", schema); code != 0 || !strings.Contains(out, "applied 0001_rules") {
		t.Fatalf("migrate: exit %d\n%s", code, out)
	}
	ps, err := rules.ParseFile(filepath.Join("..", "..", "..", "examples", "rules.json"), rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rulesTx(t, t.Context(), pool, schema, func(ctx context.Context, r *pg.Rules, tx pgx.Tx) {
		for _, p := range ps {
			if err := r.Save(ctx, tx, p); err != nil {
				t.Fatal(err)
			}
		}
	})
	return url, schema, pool
}

// rulesTx runs fn with schema's rules in one transaction on pool and
// commits it; it returns the rules for calls after the commit.
func rulesTx(t *testing.T, ctx context.Context, pool *pgxpool.Pool, schema string, fn func(ctx context.Context, r *pg.Rules, tx pgx.Tx)) *pg.Rules {
	t.Helper()
	r, err := pg.NewRules(pool, schema)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fn(ctx, r, tx)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestWarmFromPostgres(t *testing.T) {
	url, schema := seeded(t)
	srv := testredis.StartServer(t)
	redisURL := "redis://" + srv.Addr() + "/0"
	steps := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"dry run", []string{"-dry-run"}, 0, []string{"dry run: nothing was written", "summary: added 6, updated 0, unchanged 0"}},
		{"first run", nil, 0, []string{"target: redis " + srv.Addr() + " db 0 prefix tierset (from -redis)\n", "summary: added 6, updated 0, unchanged 0"}},
		{"second run is idempotent", nil, 0, []string{"summary: added 0, updated 0, unchanged 6"}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			args := append([]string{"warm", "-source", url, "-schema", schema, "-redis", redisURL}, st.args...)
			code, out := runCLI(t, args...)
			if code != st.code {
				t.Fatalf("exit %d, want %d\n%s", code, st.code, out)
			}
			for _, w := range st.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "s3cret") || !strings.Contains(out, "postgres:xxxxx@") {
				t.Errorf("the source password is not redacted:\n%s", out)
			}
		})
	}
}

// TestWarmRefusedRow: a promotion gradient refuses is named, the others
// warm, and the exit code is 1.
func TestWarmRefusedRow(t *testing.T) {
	url, schema, pool := seededPool(t)
	if _, err := pool.Exec(t.Context(), `UPDATE `+schema+`.tiers SET amount = 30.001 WHERE promotion_id = 'bundle-2-for-30' AND tier_id = 'two'`); err != nil {
		t.Fatal(err)
	}
	srv := testredis.StartServer(t)
	code, out := runCLI(t, "warm", "-source", url, "-schema", schema, "-redis", "redis://"+srv.Addr()+"/0")
	if code != 1 || !strings.Contains(out, "refused (reasons below): bundle-2-for-30") || !strings.Contains(out, "summary: added 5, updated 0, unchanged 0, deleted 0, pruned 0, stale 0, refused 1") {
		t.Fatalf("exit %d, want 1 naming bundle-2-for-30 with the other 5 added:\n%s", code, out)
	}
}

func TestWarmWatch(t *testing.T) {
	url, schema := seeded(t)
	srv := testredis.StartServer(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"warm", "-source", url, "-schema", schema, "-redis", "redis://" + srv.Addr() + "/0", "-watch"}, &out, &out)
	}()
	waitFor(t, &out, "full pass:")
	pool, _ := pgtest.Schema(t) // a second pool on the same database
	ps, _ := rules.ParseFile(filepath.Join("..", "..", "..", "examples", "rules.json"), rules.Options{})
	p := ps[0]
	p.Tiers[0].Reward.Percent = decimal.RequireFromString("9")
	rulesTx(t, ctx, pool, schema, func(ctx context.Context, r *pg.Rules, tx pgx.Tx) {
		if err := r.Save(ctx, tx, p); err != nil {
			t.Fatal(err)
		}
	})
	waitFor(t, &out, p.ID+": updated")
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("interrupted -watch exited %d\n%s", c, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("-watch did not stop within 10 s of its context ending")
	}
}

// TestWarmAppliesDeletions: rows deleted since the last warm-up are
// deleted from Redis by their tombstones, without -prune; a second run
// finds them already gone (an ordered delete leaves its own tombstone).
func TestWarmAppliesDeletions(t *testing.T) {
	url, schema, pool := seededPool(t)
	srv := testredis.StartServer(t)
	args := []string{"warm", "-source", url, "-schema", schema, "-redis", "redis://" + srv.Addr() + "/0"}
	if code, out := runCLI(t, args...); code != 0 {
		t.Fatalf("first warm: exit %d\n%s", code, out)
	}
	rulesTx(t, t.Context(), pool, schema, func(ctx context.Context, r *pg.Rules, tx pgx.Tx) {
		if ok, err := r.Delete(ctx, tx, "10086"); err != nil || !ok {
			t.Fatalf("delete: %v %v", ok, err)
		}
	})
	code, out := runCLI(t, args...)
	if code != 0 || !strings.Contains(out, "deleted (their rows are gone): 10086") || !strings.Contains(out, "unchanged 5, deleted 1, pruned 0") {
		t.Fatalf("exit %d, want 10086 deleted without -prune\n%s", code, out)
	}
}

// TestWarmPruneLimit: with two rows deleted, -prune is refused under the
// default limit (10% of 6, at least 1) and writes nothing; -max-prune 2
// lets it through.
func TestWarmPruneLimit(t *testing.T) {
	url, schema, pool := seededPool(t)
	srv := testredis.StartServer(t)
	redisURL := "redis://" + srv.Addr() + "/0"
	warmArgs := func(extra ...string) []string {
		return append([]string{"warm", "-source", url, "-schema", schema, "-redis", redisURL}, extra...)
	}
	if code, out := runCLI(t, warmArgs()...); code != 0 {
		t.Fatalf("first warm: exit %d\n%s", code, out)
	}
	ctx := t.Context()
	r := rulesTx(t, ctx, pool, schema, func(ctx context.Context, r *pg.Rules, tx pgx.Tx) {
		for _, id := range []string{"qty-3-5-10", "10086"} {
			if ok, err := r.Delete(ctx, tx, id); err != nil || !ok {
				t.Fatalf("delete %s: %v %v", id, ok, err)
			}
		}
	})
	// Deletions older than the tombstones kept are known only by absence.
	if n, err := r.PurgeTombstones(ctx, time.Now().Add(time.Hour)); err != nil || n != 2 {
		t.Fatalf("PurgeTombstones = %d, %v; want 2", n, err)
	}
	steps := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"over the default limit", []string{"-prune"}, 1, "run again with -max-prune 2"},
		{"nothing was pruned", nil, 0, "summary: added 0, updated 0, unchanged 4, deleted 0, pruned 0"},
		{"explicit limit", []string{"-prune", "-max-prune", "2"}, 0, "pruned 2"},
		{"negative limit", []string{"-prune", "-max-prune", "-1"}, 2, "-max-prune -1"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			code, out := runCLI(t, warmArgs(st.args...)...)
			if code != st.code || !strings.Contains(out, st.want) {
				t.Fatalf("exit %d, want %d and %q\n%s", code, st.code, st.want, out)
			}
		})
	}
}

// TestUnmigratedSchema: warm and import against a schema never migrated
// fail with what to run next, and print no summary of zeros first.
func TestUnmigratedSchema(t *testing.T) {
	url := pgtest.URL(t)
	srv := testredis.StartServer(t)
	schema := fmt.Sprintf("t_never_migrated_%d", time.Now().UnixNano()) // never created: nothing to clean up
	rulesFile := filepath.Join("..", "..", "..", "examples", "rules.json")
	for _, args := range [][]string{
		{"warm", "-source", url, "-schema", schema, "-redis", srv.Addr()},
		{"import", "-source", url, "-schema", schema, "-rules", rulesFile},
	} {
		code, out := runCLI(t, args...)
		if code != 1 || !strings.Contains(out, "run tierset-pg migrate -source URL -schema S first") || strings.Contains(out, "summary:") {
			t.Errorf("%s on an unmigrated schema: exit %d\n%s", args[0], code, out)
		}
	}
}

// TestCommandHelp: each command's -h says what it does, with its flags,
// not the flag package's bare "Usage of".
func TestCommandHelp(t *testing.T) {
	for _, cmd := range []string{"migrate", "warm", "import"} {
		code, out := runCLI(t, cmd, "-h")
		if code != 0 || !strings.HasPrefix(out, "Usage: tierset-pg "+cmd+" -source URL") || strings.Contains(out, "Usage of") || !strings.Contains(out, "-schema") {
			t.Errorf("%s -h: exit %d\n%s", cmd, code, out)
		}
	}
}
