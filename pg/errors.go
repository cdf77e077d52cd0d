package pg

import "errors"

// Sentinel errors.
var (
	// ErrBadSchema: a schema name that is empty, too long or not a plain
	// identifier (letters, digits, underscores, not starting with a digit).
	ErrBadSchema = errors.New("pg: bad schema name")
	// ErrMigration: a migration failed; nothing of it was applied.
	ErrMigration = errors.New("pg: migration failed")
	// ErrInvalidRow: a database row that does not make a valid promotion
	// (an unknown enum, an unparsable number, or a promotion gradient
	// refuses). The error is a *RowError naming the promotion.
	ErrInvalidRow = errors.New("pg: invalid row")
	// ErrBadJob: an outbox job the delay queue would refuse (empty key,
	// oversized payload, no due time).
	ErrBadJob = errors.New("pg: bad job")
	// ErrNotPending: the outbox row is not pending (already done,
	// cancelled, or never committed).
	ErrNotPending = errors.New("pg: task not pending")
	// ErrInvalidOptions: an option out of range.
	ErrInvalidOptions = errors.New("pg: invalid options")
)

// RowError names the promotion a bad row belongs to.
type RowError struct {
	Promotion string
	Err       error
}

func (e *RowError) Error() string {
	return "pg: promotion " + quote(e.Promotion) + ": " + e.Err.Error()
}

// Unwrap returns ErrInvalidRow and the cause (often a
// *gradient.ValidationError).
func (e *RowError) Unwrap() []error { return []error{ErrInvalidRow, e.Err} }
