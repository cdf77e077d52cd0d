package budget

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// run sends a script and returns its reply, an array whose first element
// is a status and second Redis TIME in ms (the clock offset is measured on
// it). With Options.Replicas, a write is followed by WAIT on the same
// connection (a pipeline of both), and too few acknowledgements, or no
// reply to WAIT after the script's, return the reply with
// ErrNotReplicated.
func (b *Budget) run(ctx context.Context, s *redis.Script, write bool, keys []string, args ...any) (reply, error) {
	sent := time.Now()
	var v any
	var err error
	var acked int64 = -1
	var waitErr error
	if write && b.o.Replicas > 0 {
		v, acked, waitErr, err = b.runWait(ctx, s, keys, args)
	} else {
		v, err = s.Run(ctx, b.c, keys, args...).Result()
	}
	if err != nil {
		return nil, err
	}
	if s == b.s.remaining {
		b.loaded.Store(true)
	}
	r, ok := v.([]any)
	if !ok || len(r) < 2 {
		return nil, fmt.Errorf("budget: unexpected script reply %v", v)
	}
	rp := reply(r)
	if now := rp.int(1); now > 0 {
		recv := time.Now()
		b.offsetMs.Store(now - sent.Add(recv.Sub(sent)/2).UnixMilli())
	}
	if waitErr != nil {
		return rp, fmt.Errorf("%w: no reply to WAIT: %w", ErrNotReplicated, waitErr)
	}
	if acked >= 0 && acked < int64(b.o.Replicas) {
		return rp, fmt.Errorf("%w: %d of %d replicas within %v", ErrNotReplicated, acked, b.o.Replicas, b.o.ReplicaTimeout)
	}
	return rp, nil
}

// runWait is run's pipeline of the script and WAIT. waitErr is WAIT's
// failure after the script's reply came (a WAIT that outlasts the
// client's ReadTimeout, a connection lost meanwhile): the script took
// effect on the master, its replication is unknown.
func (b *Budget) runWait(ctx context.Context, s *redis.Script, keys []string, args []any) (v any, acked int64, waitErr, err error) {
	for try := 0; ; try++ {
		pipe := b.c.Pipeline()
		cmd := s.EvalSha(ctx, pipe, keys, args...)
		w := pipe.Do(ctx, "WAIT", b.o.Replicas, b.o.ReplicaTimeout.Milliseconds())
		_, _ = pipe.Exec(ctx)
		n, werr := w.Int64()
		// go-redis stamps WAIT's transport error on the script's command
		// too, but keeps its reply: a reply read on the last try (a
		// failed read clears it) is the script's outcome.
		if v := cmd.Val(); v != nil && werr != nil {
			return v, 0, werr, nil
		}
		if err := cmd.Err(); err != nil {
			if isNoScript(err) && try == 0 {
				if err := s.Load(ctx, b.c).Err(); err != nil {
					return nil, 0, nil, err
				}
				continue
			}
			return nil, 0, nil, err
		}
		return cmd.Val(), n, werr, nil
	}
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// serverNow estimates Redis TIME from the client clock and the last
// measured offset.
func (b *Budget) serverNow() time.Time {
	return time.Now().Add(time.Duration(b.offsetMs.Load()) * time.Millisecond)
}

// reply is a script's reply array.
type reply []any

func (r reply) status() string { return r.str(0) }

func (r reply) str(i int) string {
	if i >= len(r) {
		return ""
	}
	s, _ := r[i].(string)
	return s
}

func (r reply) int(i int) int64 {
	if i >= len(r) {
		return 0
	}
	switch v := r[i].(type) {
	case int64:
		return v
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return 0
}

func (r reply) list(i int) []any {
	if i >= len(r) {
		return nil
	}
	l, _ := r[i].([]any)
	return l
}

// unexpected is the error of a status a call does not know.
func (r reply) unexpected(call string) error {
	return fmt.Errorf("budget: %s: unexpected reply %v", call, []any(r))
}

var errSkew = errors.New("budget: client clock off by more than a period")

func ms(t int64) time.Time { return time.UnixMilli(t) }
