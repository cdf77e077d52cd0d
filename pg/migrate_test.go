package pg

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestMigrateIdempotent(t *testing.T) {
	pool, schema := testDB(t) // applied once here
	ctx := testCtx(t, 30*time.Second)
	res := migrateConcurrently(t, ctx, pool, schema, 4)
	for i := range res {
		if len(res[i].Applied) != 0 {
			t.Errorf("Migrate #%d applied %v again", i, res[i].Applied)
		}
	}
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	var n, max int
	if err := pool.QueryRow(ctx, `SELECT count(*), max(version) FROM `+schema+`.schema_migrations`).Scan(&n, &max); err != nil {
		t.Fatal(err)
	}
	if n != len(ms) || max != ms[len(ms)-1].version || res[0].Current != max {
		t.Errorf("schema_migrations has %d rows up to %d (result says %d), want %d up to %d", n, max, res[0].Current, len(ms), ms[len(ms)-1].version)
	}
}

func TestMigrateFreshSchemaConcurrent(t *testing.T) {
	pool, schema := testDB(t)
	ctx := testCtx(t, 30*time.Second)
	fresh := schema + "_b"
	t.Cleanup(func() { _, _ = pool.Exec(testCtx(t, 10*time.Second), `DROP SCHEMA IF EXISTS `+fresh+` CASCADE`) })
	total := 0
	for _, r := range migrateConcurrently(t, ctx, pool, fresh, 3) {
		total += len(r.Applied)
	}
	ms, _ := migrations()
	if total != len(ms) {
		t.Errorf("concurrent Migrate applied %d migrations in all, want each of the %d exactly once", total, len(ms))
	}
}

// migrateConcurrently runs n Migrates of schema at once and returns their
// results; an error fails t.
func migrateConcurrently(t *testing.T, ctx context.Context, pool *pgxpool.Pool, schema string, n int) []MigrateResult {
	t.Helper()
	var wg sync.WaitGroup
	res := make([]MigrateResult, n)
	errs := make([]error, n)
	for i := range res {
		wg.Go(func() { res[i], errs[i] = Migrate(ctx, pool, schema) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Migrate #%d: %v", i, err)
		}
	}
	return res
}

func TestMigrateBadSchema(t *testing.T) {
	for _, s := range []string{"Upper", "has-dash", "1digit", "x; DROP TABLE y", strings.Repeat("a", 64)} {
		if _, err := Migrate(t.Context(), nil, s); !errors.Is(err, &ValidationError{Field: "schema"}) || !errors.Is(err, ErrInvalid) {
			t.Errorf("Migrate(%q) = %v, want a *ValidationError with Field schema", s, err)
		}
	}
}

// TestConstraintsRefuseWhatGradientRefuses writes rows straight to the
// tables, bypassing Rules.Save, and expects the database to refuse them.
func TestConstraintsRefuseWhatGradientRefuses(t *testing.T) {
	pool, s := testDB(t)
	ctx := testCtx(t, 30*time.Second)
	promo := `INSERT INTO ` + s + `.promotions (id, metric) VALUES ('p1', 'amount')`
	tier := `INSERT INTO ` + s + `.tiers (promotion_id, tier_id, position, threshold, reward_kind, amount) VALUES `
	tests := []struct {
		name, sql, constraint string
	}{
		{"duplicate threshold 5 vs 5.00", tier + `('p1', 'a', 0, 5, 'amount_off', 1), ('p1', 'b', 1, 5.00, 'amount_off', 2)`, "tiers_threshold_unique"},
		{"duplicate match value", `INSERT INTO ` + s + `.tiers (promotion_id, tier_id, position, match_value, reward_kind, amount) VALUES ('p1', 'a', 0, 9.9, 'fixed_price', 1), ('p1', 'b', 1, 9.90, 'fixed_price', 2)`, "tiers_match_value_unique"},
		{"negative amount", tier + `('p1', 'a', 0, 5, 'amount_off', -1)`, "tiers_amount_check"},
		{"negative cap", `INSERT INTO ` + s + `.tiers (promotion_id, tier_id, position, threshold, reward_kind, percent, cap) VALUES ('p1', 'a', 0, 5, 'percent_off', 10, -0.01)`, "tiers_cap_check"},
		{"percent over 100", `INSERT INTO ` + s + `.tiers (promotion_id, tier_id, position, threshold, reward_kind, percent) VALUES ('p1', 'a', 0, 5, 'percent_off', 100.5)`, "tiers_percent_check"},
		{"zero threshold", tier + `('p1', 'a', 0, 0, 'amount_off', 1)`, "tiers_threshold_check"},
		{"negative threshold", tier + `('p1', 'a', 0, -3, 'amount_off', 1)`, "tiers_threshold_check"},
		{"no match field", `INSERT INTO ` + s + `.tiers (promotion_id, tier_id, position, reward_kind, amount) VALUES ('p1', 'a', 0, 'amount_off', 1)`, "tiers_match"},
		{"end equals start", `INSERT INTO ` + s + `.promotions (id, metric, starts_at, ends_at) VALUES ('p2', 'amount', '2026-01-01Z', '2026-01-01Z')`, "promotions_window"},
		{"end before start", `INSERT INTO ` + s + `.promotions (id, metric, starts_at, ends_at) VALUES ('p2', 'amount', '2026-01-02Z', '2026-01-01Z')`, "promotions_window"},
		{"unknown metric", `INSERT INTO ` + s + `.promotions (id, metric) VALUES ('p2', 'weight')`, "promotions_metric_check"},
		{"brace in id", `INSERT INTO ` + s + `.promotions (id, metric) VALUES ('p{2}', 'amount')`, "promotions_id_check"},
		{"space in id", `INSERT INTO ` + s + `.promotions (id, metric) VALUES ('p 2', 'amount')`, "promotions_id_check"},
		{"gift qty 0", tier + `('p1', 'a', 0, 5, 'amount_off', 1); INSERT INTO ` + s + `.gifts (promotion_id, tier_id, position, sku, qty) VALUES ('p1', 'a', 0, 'SKU1', 0)`, "gifts_qty_check"},
		{"tier of a missing promotion", `INSERT INTO ` + s + `.tiers (promotion_id, tier_id, position, threshold, reward_kind, amount) VALUES ('nope', 'a', 0, 5, 'amount_off', 1)`, "tiers_promotion_id_fkey"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if _, err := tx.Exec(ctx, promo); err != nil {
				t.Fatal(err)
			}
			_, err = tx.Exec(ctx, tt.sql)
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.ConstraintName != tt.constraint {
				t.Fatalf("got %v, want a violation of %s", err, tt.constraint)
			}
		})
	}
}

// TestMigrationFailureLeavesNothing applies a migration whose second
// statement fails: its first statement and its version row must not stay.
func TestMigrationFailureLeavesNothing(t *testing.T) {
	pool, schema := testDB(t)
	ctx := testCtx(t, 30*time.Second)
	bad := migration{version: 9999, name: "broken", sql: `CREATE TABLE __schema__.half (id int); SELECT * FROM __schema__.no_such_table;`}
	applied, err := applyOne(ctx, pool, schema, bad)
	if applied || !errors.Is(err, ErrMigration) || !strings.Contains(err.Error(), "9999_broken") {
		t.Fatalf("applyOne = %v, %v; want ErrMigration naming 9999_broken", applied, err)
	}
	var half, row bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL, EXISTS (SELECT 1 FROM `+schema+`.schema_migrations WHERE version = 9999)`, schema+".half").Scan(&half, &row); err != nil {
		t.Fatal(err)
	}
	if half || row {
		t.Fatalf("after a failed migration: table half exists %v, version row exists %v; want neither", half, row)
	}
}
