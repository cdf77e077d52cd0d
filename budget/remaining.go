package budget

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// NoCap is Left's value for a measure no cap limits.
const NoCap = -1

// Left is what a promotion still allows a customer (its attributes) now:
// the least any of its caps leaves, MaxPerCart included for Uses.
type Left struct {
	Uses  int64 // NoCap when no cap counts uses
	Spend int64 // minor units; NoCap when no cap counts spend
}

// Remaining answers, in one round trip, what each promotion named still
// allows for the given attributes (the values every per-attribute cap
// needs), holds whose time has passed given back first.
func (b *Budget) Remaining(ctx context.Context, attrs map[string]string, promotions ...string) (map[string]Left, error) {
	q, err := b.remainingQuery(attrs, promotions)
	if err != nil {
		return nil, err
	}
	for try := 0; ; try++ {
		rp, err := b.run(ctx, b.s.remaining, false, q.keys, q.args(b)...)
		if rp == nil {
			return nil, err
		}
		if rp.status() == "skew" && try == 0 {
			q.now = ms(rp.int(1))
			continue
		}
		return q.decode(rp)
	}
}

// RemainingCmd is a Remaining queued on a pipeline: Result decodes it
// after the pipeline's Exec.
type RemainingCmd struct {
	b   *Budget
	q   *remainingQuery
	cmd *redis.Cmd
}

// RemainingPipe queues Remaining on pipe, beside other commands of the
// same round trip (a cart pricing's pipeline): Result reads it after
// Exec. Until a script of this Budget has run on the server it sends the
// script itself, then only its SHA; a NOSCRIPT (a restarted server)
// returns an error and the next call sends the script again.
func (b *Budget) RemainingPipe(ctx context.Context, pipe redis.Pipeliner, attrs map[string]string, promotions ...string) (*RemainingCmd, error) {
	q, err := b.remainingQuery(attrs, promotions)
	if err != nil {
		return nil, err
	}
	var cmd *redis.Cmd
	if b.loaded.Load() {
		cmd = b.s.remaining.EvalSha(ctx, pipe, q.keys, q.args(b)...)
	} else {
		cmd = b.s.remaining.Eval(ctx, pipe, q.keys, q.args(b)...)
	}
	return &RemainingCmd{b: b, q: q, cmd: cmd}, nil
}

// Result is the Remaining answer once the pipeline ran.
func (c *RemainingCmd) Result() (map[string]Left, error) {
	v, err := c.cmd.Result()
	if err != nil {
		if isNoScript(err) {
			c.b.loaded.Store(false)
		}
		return nil, err
	}
	c.b.loaded.Store(true)
	r, _ := v.([]any)
	rp := reply(r)
	if rp.status() == "skew" {
		return nil, errSkew
	}
	return c.q.decode(rp)
}

type remainingQuery struct {
	bd   body
	ps   []Promotion
	now  time.Time
	keys []string
	refs []capRef
}

func (b *Budget) remainingQuery(attrs map[string]string, promotions []string) (*remainingQuery, error) {
	lines := make([]Line, len(promotions))
	for i, p := range promotions {
		lines[i] = Line{Promotion: p, Uses: 1}
	}
	bd, ps, err := b.check(attrs, lines)
	if err != nil {
		return nil, err
	}
	return &remainingQuery{bd: bd, ps: ps, now: b.serverNow(), keys: []string{b.k.base, b.k.epoch, b.k.holds, b.k.unrep, b.k.keyset}}, nil
}

func (q *remainingQuery) args(b *Budget) []any {
	caps, refs := capArgs(q.bd, q.ps, q.now, true)
	q.refs = refs
	return append([]any{b.o.RecordTTL.Milliseconds(), b.reportFlag()}, caps...)
}

func (q *remainingQuery) decode(rp reply) (map[string]Left, error) {
	switch rp.status() {
	case "lost":
		return nil, ErrLost
	case "ok":
	default:
		return nil, rp.unexpected("remaining")
	}
	used := reply(rp.list(2))
	if len(used) != len(q.refs) {
		return nil, errors.New("budget: remaining: reply does not match its caps")
	}
	out := make(map[string]Left, len(q.ps))
	for _, p := range q.ps {
		l := Left{Uses: NoCap, Spend: NoCap}
		if p.MaxPerCart > 0 {
			l.Uses = p.MaxPerCart
		}
		out[p.ID] = l
	}
	for i, r := range q.refs {
		left := max(r.cap.Limit-used.int(i), 0)
		l := out[r.promo]
		if r.cap.Measure == Uses {
			l.Uses = least(l.Uses, left)
		} else {
			l.Spend = least(l.Spend, left)
		}
		out[r.promo] = l
	}
	return out, nil
}

func least(a, b int64) int64 {
	if a == NoCap {
		return b
	}
	return min(a, b)
}
