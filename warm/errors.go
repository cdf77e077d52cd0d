package warm

import (
	"errors"

	"github.com/tierset/tierset/internal/inputerr"
)

// Sentinel errors. Bad input is one sentinel, ErrInvalid, carried by a
// *ValidationError that names the input; the others name states.
var (
	// ErrInvalid: a refused input (argument or option). Every such error
	// is a *ValidationError naming the input; it matches ErrInvalid.
	ErrInvalid = errors.New("warm: invalid input")
	// ErrRefused: the cache refused one or more promotions (the error
	// also wraps each refusal); the others were written.
	ErrRefused = errors.New("warm: promotions refused")
	// ErrPruneLimit: Prune would delete more promotions than MaxPrune
	// allows. Nothing was written or deleted; Summary.WouldPrune lists
	// the promotions that would have gone.
	ErrPruneLimit = errors.New("warm: prune limit exceeded")
)

// ValidationError is a refused input: nothing was read, written or
// deleted. It matches ErrInvalid, and errors.Is(err,
// &ValidationError{Field: f}) tells which input.
//
// Field names the input: "options" (a negative Batch or MaxPrune;
// Detail names it) or "source" (a nil Source).
//
// Detail says what was refused and what is allowed; Cause is the
// underlying error, or nil.
type ValidationError = inputerr.Error[input]

// input ties ValidationError to this package's name and ErrInvalid.
type input struct{}

func (input) Package() (string, error) { return "warm", ErrInvalid }

// invalid returns the *ValidationError for field; format and args make
// Detail as fmt.Errorf would, and a %w verb sets Cause.
func invalid(field, format string, args ...any) error {
	return inputerr.New[input](field, format, args...)
}
