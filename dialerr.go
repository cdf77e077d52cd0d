package tierset

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrUnsupportedClient is returned when KeepDialErrors was given a client
// other than a *redis.Client.
var ErrUnsupportedClient = errors.New("tierset: KeepDialErrors needs a *redis.Client")

// DialError is the error of a command or pipeline whose ctx ended while
// the client could not connect: Ctx is the ctx error go-redis returned
// (its retry backoff ends with ctx.Err(), dropping why it was retrying),
// Dial the dial error that made it retry. errors.Is(err,
// context.DeadlineExceeded) and errors.As(err, *net.OpError) both see
// through it. Only a client prepared with KeepDialErrors returns it.
type DialError struct {
	Ctx  error
	Dial error
}

func (e *DialError) Error() string {
	return fmt.Sprintf("%v (last dial error: %v)", e.Ctx, e.Dial)
}

// Unwrap returns both errors, so errors.Is and errors.As reach either.
func (e *DialError) Unwrap() []error { return []error{e.Ctx, e.Dial} }

// KeepDialErrors adds a hook to c so that a command or pipeline whose ctx
// ends while dials fail returns a *DialError naming the dial error next
// to the ctx error, instead of a bare "context deadline exceeded". Every
// call of package cache or delay on c then carries it, wrapped with their
// own context. It is opt-in because it adds a hook to the caller's client:
// call it once per client, not once per Cache or Queue (each call adds
// one more hook). c must be a *redis.Client; any other type is
// ErrUnsupportedClient and c is left unchanged. A *redis.ClusterClient is
// not covered yet: its retry loop ends in the bare ctx error above its
// node clients' hooks, so the dial error of the node that failed would
// have to travel up to a hook of the cluster's, per call.
//
// The dial error attached is the client's last one, when no dial has
// succeeded since and it is at most 10 s old; a call whose ctx ends
// before any dial failed (a dial to an unanswering host still waiting
// out DialTimeout) has nothing to add, though the calls after it do.
// Errors of a WATCH transaction's own connection (cache.Refresh) are not
// covered: go-redis takes that connection outside the command hooks.
func KeepDialErrors(c redis.UniversalClient) error {
	h := &dialHook{}
	rc, ok := c.(*redis.Client)
	if !ok {
		return fmt.Errorf("%w, not %T", ErrUnsupportedClient, c)
	}
	rc.AddHook(h)
	return nil
}

// dialErrorFreshness bounds the age of the last dial error KeepDialErrors
// attaches, so that one failed dial long ago is not blamed for a slow
// command on healthy pooled connections. A down server keeps it fresh:
// go-redis's background probe dials once a second (plus its DialTimeout,
// 5 s by default, when dials hang).
const dialErrorFreshness = 10 * time.Second

// dialHook is the hook KeepDialErrors installs. Its state belongs to the
// client it is installed on.
//
// It keeps the client's last dial outcome rather than each call's own:
// go-redis dials a pooled connection on a goroutine of its own, with a
// context that carries nothing of the call's, so a dial cannot be told
// apart by the call that asked for it.
type dialHook struct {
	// last is the outcome of the client's last dial (err nil: success).
	last atomic.Pointer[dialOutcome]
}

type dialOutcome struct {
	err error
	at  time.Time
}

func (h *dialHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		// Every outcome is kept, a dial that ran out of its DialTimeout
		// included: that timeout is what an unanswering host looks like.
		conn, err := next(ctx, network, addr)
		h.last.Store(&dialOutcome{err: err, at: time.Now()})
		return conn, err
	}
}

func (h *dialHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil {
			return err
		}
		if w := h.wrap(err); w != err {
			cmd.SetErr(w)
			err = w
		}
		return err
	}
}

func (h *dialHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if err == nil {
			return err
		}
		for _, c := range cmds {
			if ce := c.Err(); ce != nil {
				if w := h.wrap(ce); w != ce {
					c.SetErr(w)
				}
			}
		}
		return h.wrap(err)
	}
}

// wrap returns err with the client's last dial error beside it when err
// is a ctx error, the last dial failed and it is fresh; else err itself.
func (h *dialHook) wrap(err error) error {
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return err
	}
	var de *DialError
	if errors.As(err, &de) {
		return err
	}
	o := h.last.Load()
	if o == nil || o.err == nil || time.Since(o.at) > dialErrorFreshness {
		return err
	}
	return &DialError{Ctx: err, Dial: o.err}
}
