package pg

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tierset/tierset/pg/internal/pgtest"
)

// EnvPGURL names the PostgreSQL the tests use.
const EnvPGURL = pgtest.EnvURL

// testDB returns a pool and a migrated schema unique to t, dropped at
// cleanup; it skips without TIERSET_PG_URL.
func testDB(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	pool, schema := pgtest.Schema(t)
	if _, err := Migrate(testCtx(t, 30*time.Second), pool, schema); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return pool, schema
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
