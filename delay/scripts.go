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

var (
	//go:embed lua/lib.lua
	luaLib string
	//go:embed lua/enqueue.lua
	luaEnqueue string
	//go:embed lua/enqueue_batch.lua
	luaEnqueueBatch string
	//go:embed lua/take.lua
	luaTake string
	//go:embed lua/ack.lua
	luaAck string
	//go:embed lua/retry.lua
	luaRetry string
	//go:embed lua/kill.lua
	luaKill string
	//go:embed lua/extend.lua
	luaExtend string
	//go:embed lua/sweep.lua
	luaSweep string
	//go:embed lua/cancel.lua
	luaCancel string
	//go:embed lua/reschedule.lua
	luaReschedule string
	//go:embed lua/requeue.lua
	luaRequeue string
	//go:embed lua/purge.lua
	luaPurge string
	//go:embed lua/remove.lua
	luaRemove string
	//go:embed lua/stats.lua
	luaStats string
	//go:embed lua/lookup.lua
	luaLookup string
	//go:embed lua/deadlist.lua
	luaDeadList string
)

// Each script is lib.lua followed by its own body.
//
// scriptEnqueue is the multi-job enqueue that EnqueueBatch pipelines (and
// that Sharded loads before its pipelines); scriptEnqueueOne is the leaner
// one-job script behind Enqueue, which costs the server less per call
// than a one-job batch (its Lua sets up fewer tables and closures).
var (
	scriptEnqueue    = redis.NewScript(luaLib + luaEnqueueBatch)
	scriptEnqueueOne = redis.NewScript(luaLib + luaEnqueue)
	scriptTake       = redis.NewScript(luaLib + luaTake)
	scriptAck        = redis.NewScript(luaLib + luaAck)
	scriptRetry      = redis.NewScript(luaLib + luaRetry)
	scriptKill       = redis.NewScript(luaLib + luaKill)
	scriptExtend     = redis.NewScript(luaLib + luaExtend)
	scriptSweep      = redis.NewScript(luaLib + luaSweep)
	scriptCancel     = redis.NewScript(luaLib + luaCancel)
	scriptReschedule = redis.NewScript(luaLib + luaReschedule)
	scriptRequeue    = redis.NewScript(luaLib + luaRequeue)
	scriptPurge      = redis.NewScript(luaLib + luaPurge)
	scriptRemove     = redis.NewScript(luaLib + luaRemove)
	scriptStats      = redis.NewScript(luaLib + luaStats)
	scriptLookup     = redis.NewScript(luaLib + luaLookup)
	scriptDeadList   = redis.NewScript(luaLib + luaDeadList)
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
	codeIndexConfig = 11
)

// codeErr is the one place script codes become errors. Informational codes
// (OK, duplicate, cancelled, dead) map to nil.
func codeErr(code int64) error {
	switch code {
	case codeOK, codeDup, codeCancelled, codeDead:
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
	case codeIndexConfig:
		return ErrIndexBuckets
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
