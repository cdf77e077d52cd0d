package budget

import (
	"errors"
	"fmt"

	"github.com/tierset/tierset/internal/inputerr"
)

// Sentinel errors. Every error this package returns wraps one of these,
// a context error or a Redis error, so callers branch with errors.Is.
var (
	// ErrInvalid: a refused input (argument or option). Every such error
	// is a *ValidationError naming the input; nothing was sent.
	ErrInvalid = errors.New("budget: invalid input")
	// ErrLimit: a cap would be passed; nothing was reserved. The error is
	// a *LimitError naming the promotion and the cap.
	ErrLimit = errors.New("budget: cap reached")
	// ErrConflict: the order already holds or redeemed a reservation made
	// with other arguments.
	ErrConflict = errors.New("budget: order reserved with other arguments")
	// ErrNotFound: no reservation of the order is known (never made, or
	// its record outlived Options.RecordTTL).
	ErrNotFound = errors.New("budget: no reservation for order")
	// ErrExpired: Confirm found the hold expired and the caps no longer
	// allow the order (the error also wraps the *LimitError).
	ErrExpired = errors.New("budget: hold expired")
	// ErrReleased: Confirm of an order that was released.
	ErrReleased = errors.New("budget: reservation released")
	// ErrConfirmed: Release of an order that was confirmed.
	ErrConfirmed = errors.New("budget: reservation confirmed")
	// ErrLost: the budget's state is not whole: its epoch key is gone
	// (Redis lost its data, or the budget was never built) or a Rebuild is
	// under way. Nothing is granted until Rebuild puts the counters back.
	ErrLost = errors.New("budget: state lost; Rebuild it")
	// ErrNotReplicated: with Options.Replicas set, WAIT saw fewer replicas
	// acknowledge the write within Options.ReplicaTimeout, or WAIT's reply
	// did not come after the write's (it outlasted the client's
	// ReadTimeout or ctx's deadline, the connection was lost). The write
	// took effect on the master; a failover now may lose it.
	ErrNotReplicated = errors.New("budget: write not acknowledged by replicas")
	// ErrUnknown: no reply of Redis says what Reserve's script did: its
	// ctx ended while the request was in flight, or the connection lost
	// the reply (go-redis's retries used up, a reset, a timeout, Redis
	// unreachable: go-redis's tries are not told apart, and a failed dial
	// may follow a try that ran), or a retry met a reply that refuses
	// without running (BUSY, LOADING, READONLY, ...). The hold may have
	// been made; the same Reserve again answers it (New false) if it was.
	// In a batch of others (Options.MaxBatch) whose reply still comes, its
	// expiry task and Observer events happen then; when no reply comes,
	// the expiry task is left to Sweep and the Observer does not see the
	// grant, as after any lost reply. The error wraps the cause and, when
	// ctx ended, matches ctx's error. It errs toward unknown: a deadline
	// that ends as a batch is written may fail the write with nothing
	// run. A ctx that ended before the call answers ctx's error alone: no
	// hold was made. A call sent alone (nothing else in flight) runs on
	// its caller's goroutine, and go-redis bounds its read by deadlines,
	// not by cancellation: cancelled, it waits for its reply (or its
	// deadline, else go-redis's ReadTimeout) and answers it. Redis's own
	// error replies (OOM, WRONGTYPE, a script error) are returned as they
	// are.
	ErrUnknown = errors.New("budget: outcome unknown")
)

// ValidationError is a refused input: nothing was sent or written. It
// matches ErrInvalid, and errors.Is(err, &ValidationError{Field: f})
// tells which input.
//
// Field names the input: "name", "prefix", "order", "lines" (none, more
// than MaxLines, or a promotion twice), "promotion" (unknown, or a bad
// ID), "uses", "amount", "hold", "attributes" (a value a cap needs is
// missing, or a bad name or value), "cap" (a bad cap in a Promotion:
// Detail names it), "location" (a period cap without a zone), "redemption"
// (in Rebuild) or "options".
type ValidationError = inputerr.Error[input]

type input struct{}

func (input) Package() (string, error) { return "budget", ErrInvalid }

func invalid(field, format string, args ...any) error {
	return inputerr.New[input](field, format, args...)
}

// LimitError says which cap refused a reservation. It matches ErrLimit.
type LimitError struct {
	Promotion string
	// Cap is the cap as defined; PerCart is set when the refusal is the
	// promotion's MaxPerCart.
	Cap     Cap
	PerCart bool
	// Used is what the cap's counter held (confirmed plus live holds), and
	// Asked what the reservation would have added.
	Used, Asked int64
}

func (e *LimitError) Error() string {
	if e.PerCart {
		return fmt.Sprintf("budget: cap reached: promotion %q allows %d uses per cart, asked %d", e.Promotion, e.Cap.Limit, e.Asked)
	}
	return fmt.Sprintf("budget: cap reached: promotion %q %s: used %d of %d, asked %d", e.Promotion, e.Cap, e.Used, e.Cap.Limit, e.Asked)
}

func (e *LimitError) Unwrap() error { return ErrLimit }
