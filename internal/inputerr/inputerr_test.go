package inputerr

import (
	"errors"
	"testing"
)

var (
	errA = errors.New("a: invalid input")
	errB = errors.New("b: invalid input")
)

type pkgA struct{}

func (pkgA) Package() (string, error) { return "a", errA }

type pkgB struct{}

func (pkgB) Package() (string, error) { return "b", errB }

// An Error matches its own package's sentinel and Field, never another
// package's, even when it wraps the other's as its Cause.
func TestErrorMatchesItsPackageOnly(t *testing.T) {
	cause := New[pkgB]("key", "empty")
	err := New[pkgA]("key", "job: %w", cause)
	if got, want := err.Error(), "a: invalid key: job: b: invalid key: empty"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	for _, tt := range []struct {
		name   string
		err    error
		target error
		want   bool
	}{
		{"own sentinel", err, errA, true},
		{"wrapped sentinel", err, errB, true},
		{"own field", err, &Error[pkgA]{Field: "key"}, true},
		{"any field", err, &Error[pkgA]{}, true},
		{"other field", err, &Error[pkgA]{Field: "token"}, false},
		{"other package's sentinel, unwrapped", cause, errA, false},
		{"other package's field, unwrapped", cause, &Error[pkgA]{Field: "key"}, false},
	} {
		if got := errors.Is(tt.err, tt.target); got != tt.want {
			t.Errorf("%s: errors.Is = %v, want %v", tt.name, got, tt.want)
		}
	}
	var b *Error[pkgB]
	if !errors.As(err, &b) || b != cause {
		t.Fatalf("errors.As reached %v, want the wrapped cause %v", b, cause)
	}
}
