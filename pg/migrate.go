package pg

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one embedded SQL file, named NNNN_name.sql.
type migration struct {
	version int
	name    string
	sql     string
}

func migrations() ([]migration, error) {
	files, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	out := make([]migration, 0, len(files))
	for _, f := range files {
		base := strings.TrimSuffix(strings.TrimPrefix(f, "migrations/"), ".sql")
		num, name, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("%w: file %s is not NNNN_name.sql", ErrMigration, f)
		}
		b, err := migrationFS.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: name, sql: string(b)})
	}
	return out, nil
}

// MigrateResult lists what Migrate did.
type MigrateResult struct {
	Applied []string // migrations applied now, as NNNN_name
	Current int      // the schema's version afterwards
}

// Migrate creates schema if needed and applies, in order, every embedded
// migration it has not applied yet, each in its own transaction together
// with its row in schema.schema_migrations: a failed migration leaves
// nothing behind, and running Migrate again is a no-op. Concurrent
// Migrate calls on one schema serialise on an advisory lock. schema ""
// means DefaultSchema.
func Migrate(ctx context.Context, db DB, schema string) (MigrateResult, error) {
	return migrateTo(ctx, db, schema, 0)
}

// migrateTo is Migrate up to version upTo (0: all); tests use it to build
// an older schema.
func migrateTo(ctx context.Context, db DB, schema string, upTo int) (MigrateResult, error) {
	var res MigrateResult
	schema, err := checkSchema(schema)
	if err != nil {
		return res, err
	}
	ms, err := migrations()
	if err != nil {
		return res, err
	}
	for _, m := range ms {
		if upTo > 0 && m.version > upTo {
			break
		}
		applied, err := applyOne(ctx, db, schema, m)
		if err != nil {
			return res, err
		}
		if applied {
			res.Applied = append(res.Applied, fmt.Sprintf("%04d_%s", m.version, m.name))
		}
		res.Current = m.version
	}
	return res, nil
}

func applyOne(ctx context.Context, db DB, schema string, m migration) (applied bool, err error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("%w: %04d_%s: begin: %w", ErrMigration, m.version, m.name, err)
	}
	defer func() {
		if !applied {
			_ = tx.Rollback(ctx)
		}
	}()
	fail := func(step string, err error) (bool, error) {
		return false, fmt.Errorf("%w: %s.%04d_%s: %s: %w", ErrMigration, schema, m.version, m.name, step, err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('tierset.migrate.' || $1::text))`, schema); err != nil {
		return fail("lock", err)
	}
	if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+schema); err != nil {
		return fail("create schema", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+schema+`.schema_migrations (
		version integer PRIMARY KEY,
		name text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fail("schema_migrations", err)
	}
	var done bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+schema+`.schema_migrations WHERE version = $1)`, m.version).Scan(&done); err != nil {
		return fail("read version", err)
	}
	if done {
		return false, tx.Rollback(ctx)
	}
	if _, err := tx.Exec(ctx, strings.ReplaceAll(m.sql, "__schema__", schema)); err != nil {
		return fail("apply", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+schema+`.schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
		return fail("record", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fail("commit", err)
	}
	return true, nil
}
