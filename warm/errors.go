package warm

import (
	"errors"
	"fmt"
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
type ValidationError struct {
	// Field names the input: "options" (a negative Batch or MaxPrune;
	// Detail names it) or "source" (a nil Source).
	Field string
	// Detail says what was refused and what is allowed.
	Detail string
	// Cause is the underlying error, or nil.
	Cause error
}

func (e *ValidationError) Error() string {
	return "warm: invalid " + e.Field + ": " + e.Detail
}

func (e *ValidationError) Unwrap() error { return e.Cause }

// Is makes every ValidationError match ErrInvalid, and a
// *ValidationError target match when its Field is empty or the same.
func (e *ValidationError) Is(target error) bool {
	if target == ErrInvalid {
		return true
	}
	t, ok := target.(*ValidationError)
	return ok && (t.Field == "" || t.Field == e.Field)
}

// invalid returns the *ValidationError for field; format and args make
// Detail as fmt.Errorf would, and a %w verb sets Cause.
func invalid(field, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &ValidationError{Field: field, Detail: err.Error(), Cause: errors.Unwrap(err)}
}
