package pg

import (
	"context"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what this package needs of a *pgxpool.Pool (a *pgx.Conn also
// satisfies it, for single-connection use).
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Querier is what a read or write inside a transaction needs: a pgx.Tx,
// a pool or a connection.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Schema names are kept to plain lower-case identifiers so they need no
// quoting anywhere (and a notification's schema compares as written).
var schemaRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// DefaultSchema is the schema used when a constructor is given "".
const DefaultSchema = "tierset"

func checkSchema(s string) (string, error) {
	if s == "" {
		return DefaultSchema, nil
	}
	if !schemaRE.MatchString(s) {
		return "", invalid("schema", "%q (want [a-z_][a-z0-9_]*, at most 63 bytes)", s)
	}
	return s, nil
}

// sleep waits d or until ctx ends, and then returns ctx's error.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func quote(s string) string { return strconv.Quote(s) }
