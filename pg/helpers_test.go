package pg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// EnvPGURL names the PostgreSQL the tests use, for example
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable.
const EnvPGURL = "TIERSET_PG_URL"

var nonIdent = regexp.MustCompile(`[^a-z0-9_]+`)

// testDB connects to TIERSET_PG_URL and migrates a schema unique to t,
// dropped (CASCADE) at cleanup. It skips when the variable is unset.
func testDB(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	url := os.Getenv(EnvPGURL)
	if url == "" {
		t.Skip(EnvPGURL + " is not set: this test needs a PostgreSQL (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatalf("pgxpool.New: %v", err)
	}
	t.Cleanup(pool.Close)
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("ping %s: %v", RedactURL(url), err)
	}
	var buf [4]byte
	_, _ = rand.Read(buf[:])
	name := nonIdent.ReplaceAllString(strings.ToLower(t.Name()), "_")
	schema := "t_" + name[:min(len(name), 40)] + "_" + hex.EncodeToString(buf[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+schema+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	if _, err := Migrate(ctx, pool, schema); err != nil {
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
