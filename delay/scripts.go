package delay

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/slot"
	"github.com/tierset/tierset/score"
)

//go:generate go run ./internal/luagen

// Each script runs as go generate composed it (internal/luacompose, the
// one list of scripts): the part of lua/lib.lua it uses followed by its
// own body, a mutating script's body wrapped by once (reply.lua), so that
// a call re-sent after its reply was lost returns the first run's reply.
// The composed files and scripts_gen.go, which declares each script's
// variable, are checked in, so the Lua Redis runs is there to read; a
// test fails when they are stale.

// Script return codes; lib.lua declares the same numbers.
const (
	codeOK          = 0
	codeDup         = 1
	codeNotFound    = 2
	codeLeaseLost   = 3
	codeBeforeEpoch = 4
	codeRange       = 5
	codeTooMany     = 6
	codeSeq         = 7
	codeCorrupt     = 8
	codeCancelled   = 9
	codeDead        = 10
	codeCtrLost     = 11
	codeIdxLost     = 12
	codeRestored    = 13
	codePaused      = 14
)

// codeErr is the one place script codes become errors. Informational codes
// (OK, duplicate, cancelled, dead) map to nil.
func codeErr(code int64) error {
	switch code {
	case codeOK, codeDup, codeCancelled, codeDead, codeRestored, codePaused:
		return nil
	case codeNotFound:
		return ErrNotFound
	case codeLeaseLost:
		return ErrLeaseLost
	case codeBeforeEpoch:
		return score.ErrBeforeEpoch
	case codeRange:
		return score.ErrOutOfRange
	case codeTooMany:
		return ErrTooManyTasks
	case codeSeq:
		return ErrSeqExhausted
	case codeCorrupt:
		return ErrCorrupt
	case codeCtrLost:
		return ErrCounterLost
	case codeIdxLost:
		return ErrIndexLost
	}
	return fmt.Errorf("%w: unknown script code %d", ErrCorrupt, code)
}

// wrapErr wraps a client error, joining ctx.Err() when the context ended.
func wrapErr(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrRedis) {
		return err
	}
	e := fmt.Errorf("%w: %s: %w", ErrRedis, op, err)
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return errors.Join(e, cerr)
	}
	return e
}

// reply is a script's array reply with typed accessors that never panic.
type reply []any

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

func (r reply) str(i int) string {
	if i >= len(r) {
		return ""
	}
	switch v := r[i].(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return ""
}

// at is element i (nil past the end).
func (r reply) at(i int) any {
	if i >= len(r) {
		return nil
	}
	return r[i]
}

// score parses an integer score as Redis formats it ("" = absent).
func (r reply) score(i int) (int64, bool) {
	s := r.str(i)
	if s == "" {
		return 0, false
	}
	n, err := score.ParseString(s)
	if err != nil {
		return 0, false
	}
	return n, true
}

// run executes a script (EVALSHA, falling back to EVAL) and returns its
// reply, sending it again while the queue's slot is being migrated, for
// up to migrationWait (see runFor).
func run(ctx context.Context, c redis.Scripter, s *redis.Script, op string, keys []string, args ...any) (reply, error) {
	return runFor(ctx, c, s, op, migrationWait, keys, args...)
}

// migrationWait bounds how long a call keeps being sent while Redis
// Cluster refuses it because its slot is moving between nodes.
const migrationWait = 10 * time.Second

// runFor is run that re-sends a call refused by a slot migration
// (migrating) for up to wait after the first refusal, at a short fixed
// interval: the refusal lasts while the slot's keys move, and an
// exponential backoff would add its last step to every task due then.
// Such a refusal means the script did not run, and the re-send carries
// the same KEYS and ARGV (a mutating call's request ID included), so a
// call runs at most once either way.
func runFor(ctx context.Context, c redis.Scripter, s *redis.Script, op string, wait time.Duration, keys []string, args ...any) (reply, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("delay: %s: %w", op, err)
	}
	if err := checkSlot(op, keys); err != nil {
		return nil, err
	}
	var end time.Time
	for {
		v, err := s.Run(ctx, c, keys, args...).Slice()
		if err == nil {
			return reply(v), nil
		}
		if !migrating(err) {
			return nil, wrapErr(ctx, op, err)
		}
		if end.IsZero() {
			end = time.Now().Add(wait)
		}
		if time.Now().After(end) || !pause(ctx, migrationPause) {
			return nil, wrapErr(ctx, op, err)
		}
	}
}

// migrationPause is the interval between the sends of a call that a slot
// migration refused; go-redis's own redirects and retries come on top.
const migrationPause = 10 * time.Millisecond

// migrating reports a refusal Redis Cluster gives while a slot moves
// between nodes, once go-redis has used its own redirects: TRYAGAIN (the
// keys of one command are split between the two nodes), or ASK / MOVED
// (its redirects ran out). The command did not run.
func migrating(err error) bool {
	return redis.HasErrorPrefix(err, "TRYAGAIN") || redis.HasErrorPrefix(err, "ASK") || redis.HasErrorPrefix(err, "MOVED")
}

// pause waits d (with up to d more of jitter) unless ctx ends first; it
// reports whether ctx is still live.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d + rand.N(d+1))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// checkSlot is the client-side Redis Cluster guard: every key of one script
// (or of one EnqueueBatch pipeline) must hash to one slot.
func checkSlot(op string, keys []string) error {
	if err := slot.Same(keys...); err != nil {
		return fmt.Errorf("delay: %s: %w: %w", op, ErrCrossSlot, err)
	}
	return nil
}

func isNoScript(err error) bool {
	return redis.HasErrorPrefix(err, "NOSCRIPT")
}
