// Package inputerr is the one refused-input error of tierset: cache,
// delay, pg and warm each export it as their ValidationError, so a bad
// input reads and matches the same way in every package.
package inputerr

import (
	"errors"
	"fmt"
)

// Package ties an Error to the package that returns it. Each package
// passes an empty struct type of its own, so a *Error of one package
// never matches (errors.Is) or is taken (errors.As) for another's, even
// where one wraps the other as its Cause.
type Package interface {
	// Package returns the package's name, the prefix of every message,
	// and its ErrInvalid sentinel, which every Error of it matches.
	Package() (name string, invalid error)
}

// Error is a refused input: nothing was sent or written. It matches the
// package's ErrInvalid, and errors.Is(err, &Error[P]{Field: f}) tells
// which input.
type Error[P Package] struct {
	// Field names the input; each package documents the names it uses.
	Field string
	// Detail says what was refused and what is allowed.
	Detail string
	// Cause is the underlying error, or nil.
	Cause error
}

func (e *Error[P]) Error() string {
	var p P
	name, _ := p.Package()
	return name + ": invalid " + e.Field + ": " + e.Detail
}

func (e *Error[P]) Unwrap() error { return e.Cause }

// Is makes every Error match its package's ErrInvalid, and a *Error
// target of the same package match when its Field is empty or the same.
func (e *Error[P]) Is(target error) bool {
	var p P
	if _, invalid := p.Package(); target == invalid {
		return true
	}
	t, ok := target.(*Error[P])
	return ok && (t.Field == "" || t.Field == e.Field)
}

// New returns the *Error for field; format and args make Detail as
// fmt.Errorf would, and a %w verb sets Cause.
func New[P Package](field, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &Error[P]{Field: field, Detail: err.Error(), Cause: errors.Unwrap(err)}
}
