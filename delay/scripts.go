package delay

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

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
	//go:embed lua/ack_done.lua
	luaAckDone string
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
	//go:embed lua/repair.lua
	luaRepair string
	//go:embed lua/reply.lua
	luaReply string
	//go:embed lua/take_kept.lua
	luaTakeKept string
)

// Each script is the part of lib.lua it uses followed by its own body;
// a mutating script's body is wrapped by once, so that a call re-sent
// after its reply was lost returns the first run's reply.
//
// scriptEnqueue is the multi-job enqueue that EnqueueBatch pipelines (and
// that Sharded loads before its pipelines); scriptEnqueueOne is the leaner
// one-job script behind Enqueue, which costs the server less per call
// than a one-job batch (its Lua sets up fewer tables and closures).
var (
	scriptEnqueue    = redis.NewScript(once(luaEnqueueBatch, "rp_ints", "rp_unints"))
	scriptEnqueueOne = redis.NewScript(once(luaEnqueue, "", ""))
	scriptTake       = redis.NewScript(once(luaTake, "take_keep", "take_grow"))
	scriptAck        = redis.NewScript(once(luaAck, "rp_codes", "rp_uncodes"))
	scriptAckDone    = redis.NewScript(once(luaAckDone, "rp_codes", "rp_uncodes"))
	scriptRetry      = redis.NewScript(once(luaRetry, "", ""))
	scriptKill       = redis.NewScript(once(luaKill, "", ""))
	scriptExtend     = redis.NewScript(once(luaExtend, "", ""))
	scriptSweep      = redis.NewScript(once(luaSweep, "", ""))
	scriptCancel     = redis.NewScript(once(luaCancel, "", ""))
	scriptReschedule = redis.NewScript(once(luaReschedule, "", ""))
	scriptRequeue    = redis.NewScript(once(luaRequeue, "", ""))
	scriptPurge      = redis.NewScript(once(luaPurge, "", ""))
	scriptRemove     = redis.NewScript(once(luaRemove, "", ""))
	scriptStats      = redis.NewScript(compose(luaLib, luaStats))
	scriptLookup     = redis.NewScript(compose(luaLib, luaLookup))
	scriptDeadList   = redis.NewScript(compose(luaLib, luaDeadList))
	scriptRepair     = redis.NewScript(once(luaRepair, "", ""))
)

// once composes a mutating script: body runs as the function rp_body under
// rp_run (reply.lua), which keeps its reply under the call's reply key.
// keep and grow, when not empty, name the functions (reply.lua,
// take_kept.lua) that store a bulk reply more cheaply than the generic
// encoding and read it back; compose brings in only the ones named.
func once(body, keep, grow string) string {
	tail := "return rp_run(rp_body)\n"
	if keep != "" {
		tail = "return rp_run(rp_body, " + keep + ", " + grow + ")\n"
	}
	return compose(luaLib+luaReply+luaTakeKept, "local function rp_body()\n"+body+"\nend\n"+tail)
}

var libFunc = regexp.MustCompile(`(?m)^local function ([A-Za-z_][A-Za-z0-9_]*)`)

// words is the set of words (runs of [0-9A-Za-z_], what \b delimits) in
// text: a name is used there when it is one of them. One scan per text,
// where a regexp per name and text made composing the scripts take about
// 0.6 s at start-up.
func words(text string) map[string]bool {
	m := map[string]bool{}
	isWord := func(c byte) bool {
		return c == '_' || c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
	}
	for i := 0; i < len(text); {
		if !isWord(text[i]) {
			i++
			continue
		}
		j := i
		for j < len(text) && isWord(text[j]) {
			j++
		}
		m[text[i:j]] = true
		i = j
	}
	return m
}

// compose prepends to body the prelude of lib (everything before its
// first function: the header, codes and constants) and the lib functions
// body uses, directly or through other lib functions, in lib's order.
//
// Why not all of lib: a script runs its chunk from the top on every call,
// and each "local function" there allocates a closure: the whole lib cost
// about a third of a one-job enqueue's server time, so a script pays only
// for what it calls.
func compose(lib, body string) string {
	lines := strings.SplitAfter(lib, "\n")
	type chunk struct {
		name string
		text string
		uses map[string]bool // the words of text
	}
	var chunks []chunk
	var starts []int
	var names []string
	for i, l := range lines {
		if !strings.HasPrefix(l, "local function ") {
			continue
		}
		if m := libFunc.FindStringSubmatch(l); m != nil {
			s := i
			for s > 0 && strings.HasPrefix(lines[s-1], "--") {
				s-- // the comment above a function travels with it
			}
			starts = append(starts, s)
			names = append(names, m[1])
		}
	}
	if len(starts) == 0 {
		return lib + body
	}
	for k, s := range starts {
		end := len(lines)
		if k+1 < len(starts) {
			end = starts[k+1]
		}
		text := strings.Join(lines[s:end], "")
		chunks = append(chunks, chunk{names[k], text, words(text)})
	}
	bodyUses := words(body)
	need := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for _, c := range chunks {
			if need[c.name] {
				continue
			}
			if bodyUses[c.name] {
				need[c.name], changed = true, true
				continue
			}
			for _, d := range chunks {
				if need[d.name] && d.name != c.name && d.uses[c.name] {
					need[c.name], changed = true, true
					break
				}
			}
		}
	}
	var b strings.Builder
	b.WriteString(strings.Join(lines[:starts[0]], ""))
	for _, c := range chunks {
		if need[c.name] {
			b.WriteString(c.text)
		}
	}
	b.WriteString(body)
	return b.String()
}

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
)

// codeErr is the one place script codes become errors. Informational codes
// (OK, duplicate, cancelled, dead) map to nil.
func codeErr(code int64) error {
	switch code {
	case codeOK, codeDup, codeCancelled, codeDead, codeRestored:
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
