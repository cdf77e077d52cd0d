// Package pgtest gives the pg module's tests a PostgreSQL schema of their
// own: it connects to TIERSET_PG_URL, names a fresh schema after the test
// and drops it (CASCADE) at cleanup. Without the variable it skips.
package pgtest

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

// EnvURL names the PostgreSQL the tests use, for example
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable.
const EnvURL = "TIERSET_PG_URL"

var nonIdent = regexp.MustCompile(`[^a-z0-9_]+`)

// URL returns TIERSET_PG_URL, or skips t saying why.
func URL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(EnvURL)
	if url == "" {
		t.Skip(EnvURL + " is not set: this test needs a PostgreSQL (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
	}
	return url
}

// Schema returns a pool on TIERSET_PG_URL and a schema name unique to t
// (not yet created), dropped with everything in it at cleanup.
func Schema(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	url := URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatalf("pgxpool.New: %v", err)
	}
	t.Cleanup(pool.Close)
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("ping PostgreSQL at %s: %v", EnvURL, err)
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
	return pool, schema
}
