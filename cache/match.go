package cache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/score"
)

// Query is one cart line: which promotion, and the line's value in the
// promotion's metric (items, or money in major units).
type Query struct {
	Promotion string
	Metric    gradient.Metric
	Value     decimal.Decimal
}

// QuantityQuery asks which tier n items reach.
func QuantityQuery(promotion string, n int64) Query {
	return Query{Promotion: promotion, Metric: gradient.Quantity, Value: decimal.NewFromInt(n)}
}

// AmountQuery asks which tier a money amount (major units, e.g. 99.99)
// reaches. It is floored to the minor units of Options.MinorDigits.
func AmountQuery(promotion string, amount decimal.Decimal) Query {
	return Query{Promotion: promotion, Metric: gradient.Amount, Value: amount}
}

// MatchOptions selects the optional parts of a match.
type MatchOptions struct {
	// Next also returns the lowest tier above the hit (or the lowest tier
	// when none is reached) and the Shortfall to it, in the same round trip.
	Next bool
	// Gifts also fetches the gift lists of hit tiers that have gifts, in
	// one more round trip (none when no hit has gifts).
	Gifts bool
}

// Result is the answer for one query. Tier and Next are read-only: with
// a near cache they point into the held ladder, shared by every reader, so
// copy a TierHit before changing it (Gifts and MatchOptions.Gifts set
// Tier to a copy that carries the list).
type Result struct {
	Promotion string
	// Tier is the hit, nil unless Err is nil (or ErrGiftsGone, ErrDamaged
	// or ErrCorrupt from the gift fetch, which keep the hit).
	Tier *TierHit
	// Next is the next tier up (MatchOptions.Next), also set with ErrNoTier
	// so the caller can show "buy 2 more to get 10% off"; nil at the top.
	Next *TierHit
	// Shortfall is how much more of the metric reaches Next.
	Shortfall decimal.Decimal
	// Version is the promotion version that answered.
	Version string
	// Err is nil for a hit, else ErrNoTier, ErrNotFound, ErrNotActive,
	// ErrDamaged, ErrMetricMismatch, ErrDigitsMismatch, ErrInvalid (a
	// *ValidationError, Field "query" or "id"), ErrCorrupt, or with a
	// read-through Loader ErrLoad (its failure, the caller's ctx ending
	// while it waited included) (errors.Is).
	Err error
}

// TierHit is the tier a query reached (Result.Tier) or the next one up
// (Result.Next): its ID, threshold and reward, and its gifts once fetched.
type TierHit struct {
	ID string
	// Score is the tier's threshold score (count, or minor units).
	Score int64
	// Threshold is the matched value the score encodes (Threshold, or
	// MatchValue for the parity rule kinds), in the promotion's metric.
	Threshold decimal.Decimal
	Reward    gradient.Reward
	// HasGifts says whether the tier has gifts; Gifts holds them once
	// fetched (MatchOptions.Gifts or Cache.Gifts).
	HasGifts bool
	Gifts    []gradient.Gift
}

// line is the working state of one query.
type line struct {
	score  int64
	key    string // the promotion's tiers key (Cache.keys)
	keyArg any    // key, boxed once per promotion (Cache.keys)
	bound  string // "(score", the next-tier range's exclusive bound (MatchOptions.Next)
	// hit and next are the line's own ZRANGEs; a line answered by its
	// group's read (cartgroup.go) has none, or only next.
	hit  *redis.StringSliceCmd
	next *redis.StringSliceCmd
	// hitRaw and nextRaw are the replies evaluate reads: the member found
	// (hitOK, nextOK), else nothing stored in the range.
	hitRaw, nextRaw string
	hitOK, nextOK   bool
	sent            bool // read in this call's pipeline (its own command or its group's)
	wantNext        bool // MatchOptions.Next
	// recheck: the first read cannot be answered alone (nothing stored,
	// or hit and next from different versions); recheck re-reads it
	// with its meta key in one script call. reread: this is that re-read.
	recheck, reread bool
	metaExists      bool // the re-read found the meta key
	// hitDec and nextDec are hitRaw and nextRaw decoded, when the group's
	// reply was (cartGroups.answer); nil, evaluate decodes them.
	hitDec, nextDec *decoded
	tag             uint32 // ownerTag of the line's promotion
	// args backs the hit command's arguments, so a call allocates them
	// once for all its lines instead of once per command.
	args [hitArgc]any
}

// takeReplies copies the replies of the line's own commands into hitRaw
// and nextRaw.
func (ln *line) takeReplies() {
	if ln.hit != nil {
		if v := ln.hit.Val(); len(v) > 0 {
			ln.hitRaw, ln.hitOK = v[0], true
		}
	}
	if ln.next != nil {
		if v := ln.next.Val(); len(v) > 0 {
			ln.nextRaw, ln.nextOK = v[0], true
		}
	}
}

// Match answers one query. On ErrNoTier the Result still carries Next (with
// MatchOptions.Next). The returned error equals Result.Err except for
// transport and context errors, which leave the Result empty.
func (c *Cache) Match(ctx context.Context, q Query, opt MatchOptions) (Result, error) {
	qs := [1]Query{q}
	var rs [1]Result
	start := c.loadStart()
	if err := c.matchInto(ctx, qs[:], opt, rs[:]); err != nil {
		return Result{Promotion: q.Promotion}, err
	}
	if c.rt != nil {
		c.readThroughLines(ctx, qs[:], opt, rs[:], start)
	}
	return rs[0], rs[0].Err
}

// MatchCart answers every line of a cart in ONE pipelined round trip,
// whatever the number of lines and tiers (on a Cluster, one per master,
// sent in parallel), plus one more only when MatchOptions.Gifts is set and
// some hit has gifts. Results are in query order; per-line failures
// (ErrNoTier, ErrNotFound, a bad query, ...) are in Result.Err. The call's
// error is only for the batch itself (ErrInvalid, Field "batch") or for transport
// and context failures; a read-through load's failure, its ctx's end
// included, is its line's ErrLoad. It is AppendMatchCart into a new slice.
func (c *Cache) MatchCart(ctx context.Context, qs []Query, opt MatchOptions) ([]Result, error) {
	rs, err := c.AppendMatchCart(ctx, nil, qs, opt)
	if rs == nil && err == nil {
		rs = []Result{} // an empty cart's results are empty, not nil (JSON "[]")
	}
	return rs, err
}

// AppendMatchCart is MatchCart appending into dst, as strconv.AppendInt
// does: it appends len(qs) Results, in query order, to dst and returns
// the extended slice. A caller pricing many carts passes the previous
// cart's slice as buf[:0], so that a cart answered from a near cache
// allocates nothing (MatchOptions.Next adds each line's Shortfall
// decimal, MatchOptions.Gifts the copies of the gift lists it returns).
// Each appended Result is written whole: nothing of what dst's spare
// capacity held before shows through. As with MatchCart, Tier and Next
// are read-only and may point into the near cache's held ladder, shared
// by every reader (see Result); the tiers MatchOptions.Gifts returns
// with their lists are the call's own, so reusing dst never hands a cart
// another cart's lists.
//
// On an error for the whole call (ErrInvalid, Field "batch"; transport
// and context failures) it returns dst unchanged, its length and its
// contents, with the error; per-line failures are in Result.Err. As with
// append, the spare capacity past len(dst) is the call's to write: a
// failed call leaves the slots it used zeroed.
func (c *Cache) AppendMatchCart(ctx context.Context, dst []Result, qs []Query, opt MatchOptions) ([]Result, error) {
	if len(qs) > MaxCartLines {
		return dst, invalid("batch", "%d lines (max %d)", len(qs), MaxCartLines)
	}
	n := len(dst)
	out := slices.Grow(dst, len(qs))[:n+len(qs)]
	rs := out[n:]
	// matchInto writes every line's Result whole before anything reads
	// it; zeroing the slots as well keeps that an assumption of no path.
	clear(rs)
	start := c.loadStart()
	if err := c.matchInto(ctx, qs, opt, rs); err != nil {
		clear(rs) // drop what the failed call left in the spare capacity
		return dst, err
	}
	if c.rt != nil {
		c.readThroughLines(ctx, qs, opt, rs, start)
	}
	return out, nil
}

// encodeQuery checks a query and turns its value into a score.
func (c *Cache) encodeQuery(q *Query) (int64, error) {
	if err := validateID(q.Promotion); err != nil {
		return 0, invalid("id", "%w", err)
	}
	return c.queryScore(q)
}

// queryScore is encodeQuery without the ID check, for a line whose ID
// matched a held ladder (only a valid ID can).
func (c *Cache) queryScore(q *Query) (int64, error) {
	digits := 0
	switch q.Metric {
	case gradient.Quantity:
	case gradient.Amount:
		// c.digits is the count; QueryScore reads a MinorDigits value, where
		// 0 stands for the default 2, so a count of 0 goes as NoMinorDigits.
		digits = c.digits
		if digits == 0 {
			digits = gradient.NoMinorDigits
		}
	default:
		return 0, invalid("query", "metric %d", q.Metric)
	}
	s, err := gradient.QueryScore(q.Metric, digits, q.Value)
	if err != nil {
		return 0, invalid("query", "%w", err)
	}
	if s >= ceilingScore {
		return 0, invalid("query", "%w: value %s is ≥ 2^53 in score units", gradient.ErrBadValue, q.Value.String())
	}
	return s, nil
}

// validateID is gradient.ValidateID with a fast path for the usual ID:
// printable ASCII other than braces, which ValidateID accepts whole (no
// whitespace, no control characters, valid UTF-8). Anything else, and
// every refusal, goes through ValidateID itself.
func validateID(id string) error {
	if len(id) == 0 || len(id) > gradient.MaxIDLen {
		return gradient.ValidateID(id)
	}
	for i := 0; i < len(id); i++ {
		if b := id[i]; b <= ' ' || b >= 0x7f || b == '{' || b == '}' {
			return gradient.ValidateID(id)
		}
	}
	return nil
}

func (c *Cache) hitArgs(key string, s int64) redis.ZRangeArgs {
	// Rev: Start is the HIGH bound.
	return redis.ZRangeArgs{Key: key, Start: score.Inclusive(s), Stop: score.NegInf, ByScore: true, Rev: true, Count: 1}
}

func (c *Cache) nextArgs(key string, s int64) redis.ZRangeArgs {
	return redis.ZRangeArgs{Key: key, Start: score.Exclusive(s), Stop: score.PosInf, ByScore: true, Count: 1}
}

// The hot path builds its ZRANGE commands itself, with exactly the
// arguments redis.ZRangeArgs would send for hitArgs and nextArgs (the
// match tests compare them), so that one call allocates the arguments of
// all its lines at once. lua/recheck.lua, off the hot path, sends the same
// two ZRANGEs.
const (
	hitArgc  = 9 // ZRANGE key s -inf BYSCORE REV LIMIT 0 1
	nextArgc = 8 // ZRANGE key (s +inf BYSCORE LIMIT 0 1
)

func (ln *line) hitCmd(ctx context.Context, cs *cmdSlab) *redis.StringSliceCmd {
	a := &ln.args
	// Rev: Start is the HIGH bound.
	a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8] = "zrange", ln.keyArg, ln.score, score.NegInf, "byscore", "rev", "limit", int64(0), int64(1)
	return cs.cmd(ctx, a[:])
}

func (ln *line) nextCmd(ctx context.Context, cs *cmdSlab, a []any) *redis.StringSliceCmd {
	a = a[:nextArgc:nextArgc]
	a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7] = "zrange", ln.keyArg, ln.bound, score.PosInf, "byscore", "limit", int64(0), int64(1)
	return cs.cmd(ctx, a)
}

// cmdSlab holds a call's commands in one slice, so a cart allocates
// none once its pooled scratch has held as many (cartScratch.slab).
// Its capacity is set before the first command (cmdSlab.reserve) and
// never grows, as the lines point into it. A nil cmdSlab allocates each
// command alone.
type cmdSlab struct {
	cmds []redis.StringSliceCmd
}

// reserve makes room for n commands and drops what the slab held.
func (cs *cmdSlab) reserve(n int) {
	if cap(cs.cmds) < n {
		cs.cmds = make([]redis.StringSliceCmd, 0, n)
	}
	cs.cmds = cs.cmds[:0]
}

// cmd returns a new command on args: a fresh value, whatever the slot
// held before (context, reply, error, cluster slot).
func (cs *cmdSlab) cmd(ctx context.Context, args []any) *redis.StringSliceCmd {
	if cs == nil {
		return redis.NewStringSliceCmd(ctx, args...)
	}
	cs.cmds = append(cs.cmds, *redis.NewStringSliceCmd(ctx, args...))
	return &cs.cmds[len(cs.cmds)-1]
}

// prepare encodes every query, takes the tiers key of each promotion
// from Cache.keys (shared by its lines) and builds the next-tier bounds
// of the valid lines in one string, which each line slices. With sc (a cart), the valid
// lines are also sorted by promotion then score (sc.gs.order) for
// groupLines. It returns the number of lines to send.
func (c *Cache) prepare(qs []Query, lines []line, rs []Result, next bool, sc *cartScratch) int {
	pending := 0
	for i := range qs {
		rs[i] = Result{Promotion: qs[i].Promotion}
		s, err := c.encodeQuery(&qs[i])
		if err != nil {
			rs[i].Err = err
			continue
		}
		lines[i].score, lines[i].tag = s, ownerTag(qs[i].Promotion)
		pending++
	}
	if pending == 0 {
		return 0
	}
	var one [1]int
	order := one[:0] // a single line's
	if sc != nil {
		sc.sortLines(qs, lines, rs)
		order = sc.gs.order
	} else {
		for i := range rs {
			if rs[i].Err == nil {
				order = append(order, i)
			}
		}
	}
	// Lines of one promotion are adjacent in order, so each key is
	// looked up once, for the first of them.
	for x, i := range order {
		if x == 0 || qs[i].Promotion != qs[order[x-1]].Promotion {
			k := c.tiersKeyArg(qs[i].Promotion, lines[i].tag)
			lines[i].key, lines[i].keyArg = k.key, k.arg
		} else {
			lines[i].key, lines[i].keyArg = lines[order[x-1]].key, lines[order[x-1]].keyArg
		}
	}
	if !next {
		return pending
	}
	size := 0
	for _, i := range order {
		size += 1 + decimalLen(lines[i].score)
	}
	var b strings.Builder
	b.Grow(size)
	var num [20]byte
	for _, i := range order {
		b.WriteByte('(')
		b.Write(strconv.AppendInt(num[:0], lines[i].score, 10))
	}
	all, at := b.String(), 0
	for _, i := range order {
		n := 1 + decimalLen(lines[i].score)
		lines[i].bound = all[at : at+n]
		at += n
	}
	return pending
}

// decimalLen is the length of strconv.FormatInt(s, 10) for s ≥ 0.
func decimalLen(s int64) int {
	n := 1
	for s >= 10 {
		s /= 10
		n++
	}
	return n
}

func (c *Cache) matchInto(ctx context.Context, qs []Query, opt MatchOptions, rs []Result) error {
	if c.near != nil {
		if handled, err := c.nearMatch(ctx, qs, opt, rs); handled {
			return err
		}
	}
	return c.matchRedis(ctx, qs, opt, rs)
}

// matchRedis answers qs from Redis: the path of every line the near cache
// does not answer.
func (c *Cache) matchRedis(ctx context.Context, qs []Query, opt MatchOptions, rs []Result) error {
	var start time.Time
	if !c.nopObs {
		start = time.Now()
	}
	// A line's arguments go into its commands, so its memory is on the
	// heap: one line alone, or a cart's pooled lines.
	var lines []line
	var sc *cartScratch
	if len(qs) == 1 {
		lines = make([]line, 1)
	} else {
		// Lines are scratch: results never point into them (hits live in
		// their own slice), so a cart reuses them from a pool.
		sc, _ = c.scratch.Get().(*cartScratch)
		if sc == nil {
			sc = new(cartScratch)
		}
		lines = sc.linesFor(len(qs))
		defer func() {
			sc.reset(len(qs)) // drop commands, replies and keys before pooling
			c.scratch.Put(sc)
		}()
	}
	pending := c.prepare(qs, lines, rs, opt.Next, sc)
	rts := 0
	if pending > 0 {
		rts++
		var err error
		if pending == 1 && !opt.Next {
			err = c.sendSingle(ctx, lines, rs)
		} else {
			err = c.sendPipeline(ctx, qs, lines, rs, opt.Next, sc)
		}
		if err != nil {
			c.obs.OnRoundTrips(OpMatch, rts)
			return fmt.Errorf("cache: match: %w", ctxErr(ctx, err))
		}
		// One backing array for every TierHit a Result points to: the hit
		// of each line, and its next tier when asked for.
		perLine := 1
		if opt.Next {
			perLine = 2
		}
		hits := make([]TierHit, 0, pending*perLine)
		nowMs := c.now().UnixMilli()
		rechecks := 0
		for i := range lines {
			if rs[i].Err == nil && lines[i].sent {
				hits = c.evaluate(&qs[i], &lines[i], &rs[i], nowMs, hits)
				if lines[i].recheck {
					rechecks++
				}
			}
		}
		if rechecks > 0 {
			// Lines with nothing stored (not found, or damaged: meta
			// without tiers), or whose two reads saw two versions (a
			// refresh committed between them): one more round trip reads
			// them again, each atomically with its meta key (lua/recheck.lua).
			rts++
			if err := c.recheck(ctx, lines, rs); err != nil {
				c.obs.OnRoundTrips(OpMatch, rts)
				return fmt.Errorf("cache: match: %w", ctxErr(ctx, err))
			}
			for i := range lines {
				if lines[i].recheck {
					lines[i].recheck = false
					hits = c.evaluate(&qs[i], &lines[i], &rs[i], nowMs, hits)
				}
			}
		}
	}
	if c.near != nil && pending > 0 {
		// An answer from Redis is a settled read of its promotion, as a
		// ladder read's is: a ladder read sent before it must not install
		// an older version, nor a held one be served after it (see
		// near.answered).
		for i := range rs {
			switch {
			case rs[i].Version != "":
				c.near.answered(qs[i].Promotion, rs[i].Version)
			case rs[i].Err != nil && !errors.Is(rs[i].Err, ErrInvalid):
				c.near.answered(qs[i].Promotion, "") // nothing stored, damaged or corrupt
			}
		}
	}
	if opt.Gifts {
		// rs's hits are this call's own (hits, above): each takes its
		// list in place.
		n, err := c.fetchGifts(ctx, rs, true, true)
		if n > 0 {
			c.obs.OnRoundTrips(OpGifts, n)
		}
		if err != nil {
			c.obs.OnRoundTrips(OpMatch, rts)
			return fmt.Errorf("cache: match gifts: %w", ctxErr(ctx, err))
		}
	}
	if c.nopObs {
		return nil
	}
	c.obs.OnRoundTrips(OpMatch, rts)
	c.reportLookups(rs, nil, time.Since(start))
	return nil
}

// reportLookups calls OnLookup for each line but those in skip. With a
// Loader, a line that may be loaded is left to readThroughLines, which
// reports its final answer, so every line is reported once.
func (c *Cache) reportLookups(rs []Result, skip []int, d time.Duration) {
	for i := range rs {
		if (c.rt != nil && loadable(rs[i].Err)) || slices.Contains(skip, i) {
			continue
		}
		c.obs.OnLookup(rs[i].Promotion, outcomeOf(rs[i].Err), d)
	}
}

func outcomeOf(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeHit
	case err == ErrNoTier:
		return OutcomeNoTier
	case err == ErrNotFound:
		return OutcomeNotFound
	case err == ErrNotActive:
		return OutcomeNotActive
	case errors.Is(err, ErrGiftsGone):
		return OutcomeHit
	case errors.Is(err, ErrDamaged):
		return OutcomeDamaged
	case errors.Is(err, ErrNotFound): // wrapped: an ID the Loader's source does not know
		return OutcomeNotFound
	case errors.Is(err, ErrNotActive): // wrapped: a loaded promotion that ended
		return OutcomeNotActive
	}
	return OutcomeError
}

// sendSingle serves the common one-line match with a plain command, which
// is cheaper than a pipeline of one.
func (c *Cache) sendSingle(ctx context.Context, lines []line, rs []Result) error {
	for i := range lines {
		if rs[i].Err != nil {
			continue
		}
		ln := &lines[i]
		ln.hit, ln.sent = ln.hitCmd(ctx, nil), true
		_ = c.client.Process(ctx, ln.hit)
		if err := lineErr(ln.hit.Err(), &rs[i]); err != nil {
			return err
		}
		ln.takeReplies()
		return nil
	}
	return nil
}

// sendPipeline sends every line's reads in one pipeline: a line alone on
// its promotion (or too far from the others' values) its own ZRANGEs,
// the lines of one promotion together one read for all (cartgroup.go).
// sc is nil for a single line (with MatchOptions.Next).
func (c *Cache) sendPipeline(ctx context.Context, qs []Query, lines []line, rs []Result, next bool, sc *cartScratch) error {
	var pipe redis.Pipeliner
	if sc != nil {
		// Exec leaves a pipeline empty, holding no command: a cart
		// reuses its scratch's.
		if sc.pipe == nil {
			sc.pipe = c.client.Pipeline()
		}
		pipe = sc.pipe
	} else {
		pipe = c.client.Pipeline()
	}
	var gs *cartGroups
	var cmds []redis.Cmder
	var args []any
	var cs *cmdSlab
	if sc != nil {
		gs = groupLines(qs, lines, sc)
		cmds, args, cs = sc.cmds[:0], sc.args[:0], &sc.slab
	}
	// Every command's arguments in one slice, sized first: the commands
	// keep subslices of it. The commands themselves, counted first too,
	// go in one slab.
	argc, cmdc := 0, 0
	if next {
		argc += nextArgc * len(lines)
	}
	if gs != nil {
		argc += groupArgc * len(gs.groups)
		cmdc += len(gs.groups)
	}
	args = slices.Grow(args, argc)
	if cs != nil {
		for i := range lines {
			if rs[i].Err != nil {
				continue
			}
			if gs == nil || !gs.grouped(i) {
				cmdc++
			}
			if next && (gs == nil || gs.ownsNext(i)) {
				cmdc++
			}
		}
		cs.reserve(cmdc)
	}
	for i := range lines {
		ln := &lines[i]
		if rs[i].Err != nil {
			continue
		}
		ln.sent, ln.wantNext = true, next
		if gs == nil || !gs.grouped(i) {
			ln.hit = ln.hitCmd(ctx, cs)
			cmds = append(cmds, ln.hit)
		}
		if next && (gs == nil || gs.ownsNext(i)) {
			at := len(args)
			args = args[:at+nextArgc]
			ln.next = ln.nextCmd(ctx, cs, args[at:])
			cmds = append(cmds, ln.next)
		}
	}
	if gs != nil {
		cmds, args = gs.send(ctx, cs, cmds, args, lines)
	}
	if sc != nil {
		sc.cmds, sc.args = cmds, args
	}
	_ = pipe.BatchProcess(ctx, cmds...)
	_, err := pipe.Exec(ctx)
	if err != nil {
		for i := range lines {
			ln := &lines[i]
			if rs[i].Err != nil || !ln.sent {
				continue
			}
			for _, cmd := range []*redis.StringSliceCmd{ln.hit, ln.next} {
				if cmd != nil {
					if err := lineErr(cmd.Err(), &rs[i]); err != nil {
						return err
					}
				}
			}
		}
		if gs != nil {
			if err := gs.errs(lines, rs); err != nil {
				return err
			}
		}
	}
	for i := range lines {
		if rs[i].Err == nil && lines[i].sent {
			lines[i].takeReplies()
		}
	}
	if gs != nil {
		gs.answer(c, qs, lines, rs)
	}
	return nil
}

// lineErr files a Redis error reply (WRONGTYPE on a foreign key, ...) under
// its line and returns transport errors, which fail the whole call.
func lineErr(err error, r *Result) error {
	if err == nil {
		return nil
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		if r.Err == nil {
			r.Err = fmt.Errorf("cache: promotion %q: %w", r.Promotion, err)
		}
		return nil
	}
	return err
}
