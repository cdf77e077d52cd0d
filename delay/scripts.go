package delay

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/slot"
	"github.com/tierset/tierset/score"
)

//go:generate go run ./internal/luagen

// Each script runs as go generate composed it (internal/luacompose, the
// one list of scripts): the part of lua/lib.lua it uses followed by its
// own body, a mutating script's body wrapped by once (reply.lua), so that
// a call re-sent after its reply was lost returns the first run's reply.
// The files are checked in, so the Lua Redis runs is there to read; a
// test fails when they are stale.
var (
	//go:embed lua/gen/enqueue_batch.lua
	genEnqueueBatch string
	//go:embed lua/gen/enqueue.lua
	genEnqueue string
	//go:embed lua/gen/take.lua
	genTake string
	//go:embed lua/gen/ack.lua
	genAck string
	//go:embed lua/gen/ack_done.lua
	genAckDone string
	//go:embed lua/gen/retry.lua
	genRetry string
	//go:embed lua/gen/kill.lua
	genKill string
	//go:embed lua/gen/extend.lua
	genExtend string
	//go:embed lua/gen/sweep.lua
	genSweep string
	//go:embed lua/gen/cancel.lua
	genCancel string
	//go:embed lua/gen/reschedule.lua
	genReschedule string
	//go:embed lua/gen/requeue.lua
	genRequeue string
	//go:embed lua/gen/purge.lua
	genPurge string
	//go:embed lua/gen/remove.lua
	genRemove string
	//go:embed lua/gen/stats.lua
	genStats string
	//go:embed lua/gen/lookup.lua
	genLookup string
	//go:embed lua/gen/deadlist.lua
	genDeadlist string
	//go:embed lua/gen/repair.lua
	genRepair string
	//go:embed lua/gen/pause.lua
	genPause string
	//go:embed lua/gen/rate.lua
	genRate string
)

// scriptEnqueue is the multi-job enqueue that EnqueueBatch pipelines (and
// that Sharded loads before its pipelines); scriptEnqueueOne is the leaner
// one-job script behind Enqueue, which costs the server less per call
// than a one-job batch (its Lua sets up fewer tables and closures).
var (
	scriptEnqueue    = redis.NewScript(genEnqueueBatch)
	scriptEnqueueOne = redis.NewScript(genEnqueue)
	scriptTake       = redis.NewScript(genTake)
	scriptAck        = redis.NewScript(genAck)
	scriptAckDone    = redis.NewScript(genAckDone)
	scriptRetry      = redis.NewScript(genRetry)
	scriptKill       = redis.NewScript(genKill)
	scriptExtend     = redis.NewScript(genExtend)
	scriptSweep      = redis.NewScript(genSweep)
	scriptCancel     = redis.NewScript(genCancel)
	scriptReschedule = redis.NewScript(genReschedule)
	scriptRequeue    = redis.NewScript(genRequeue)
	scriptPurge      = redis.NewScript(genPurge)
	scriptRemove     = redis.NewScript(genRemove)
	scriptStats      = redis.NewScript(genStats)
	scriptLookup     = redis.NewScript(genLookup)
	scriptDeadList   = redis.NewScript(genDeadlist)
	scriptRepair     = redis.NewScript(genRepair)
	scriptPause      = redis.NewScript(genPause)
	scriptRate       = redis.NewScript(genRate)
)

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

// run executes a script (EVALSHA, falling back to EVAL) and returns its reply.
func run(ctx context.Context, c redis.Scripter, s *redis.Script, op string, keys []string, args ...any) (reply, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("delay: %s: %w", op, err)
	}
	if err := checkSlot(op, keys); err != nil {
		return nil, err
	}
	v, err := s.Run(ctx, c, keys, args...).Slice()
	if err != nil {
		return nil, wrapErr(ctx, op, err)
	}
	return reply(v), nil
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
