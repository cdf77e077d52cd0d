package pg

import (
	"errors"

	"github.com/tierset/tierset/internal/inputerr"
)

// Sentinel errors. Bad input is one sentinel, ErrInvalid, carried by a
// *ValidationError that names the input; the others name states.
var (
	// ErrInvalid: a refused input (argument, option, outbox job, schema
	// name or promotion row). Every such error is a *ValidationError
	// naming the input; it matches ErrInvalid.
	ErrInvalid = errors.New("pg: invalid input")
	// ErrMigration: a migration failed; nothing of it was applied.
	ErrMigration = errors.New("pg: migration failed")
	// ErrNotPending: the outbox row is not pending (already done,
	// cancelled, or never committed).
	ErrNotPending = errors.New("pg: task not pending")
)

// ValidationError is a refused input: nothing was written. It matches
// ErrInvalid, and errors.Is(err, &ValidationError{Field: f}) tells which
// input.
//
// Field names the input: "schema" (empty, longer than 63 bytes or not
// [a-z_][a-z0-9_]*), "options" (a nil DB, queue, pool, rules or cache,
// or an option out of range; Detail names it), "limit" or "cursor" (a
// Purge or Pending argument out of range), "key", "token", "payload" or
// "when" (an outbox job the delay queue would refuse; Cause is the
// *delay.ValidationError, so the error matches delay.ErrInvalid too) or
// "row" (a promotion's database rows that do not make a valid
// promotion: an unknown enum, an unparsable number or a promotion
// gradient refuses; Detail names it and Cause, often a
// *gradient.ValidationError, says why); for a Ledger, "tx" (a nil
// transaction), "order" (empty) or "redemption" (what package budget
// refuses of it: Cause is the *budget.ValidationError, so the error
// matches budget.ErrInvalid too), and "key" (Apply of a task that is not
// this ledger's).
//
// Detail says what was refused and what is allowed; Cause is the
// underlying error, or nil.
type ValidationError = inputerr.Error[input]

// input ties ValidationError to this package's name and ErrInvalid.
type input struct{}

func (input) Package() (string, error) { return "pg", ErrInvalid }

// invalid returns the *ValidationError for field; format and args make
// Detail as fmt.Errorf would, and a %w verb sets Cause.
func invalid(field, format string, args ...any) error {
	return inputerr.New[input](field, format, args...)
}

// rowError is the *ValidationError of promotion id's rows, refused for err.
func rowError(id string, err error) *ValidationError {
	return &ValidationError{Field: "row", Detail: "promotion " + quote(id) + ": " + err.Error(), Cause: err}
}
