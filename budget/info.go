package budget

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/keyname"
	"github.com/tierset/tierset/internal/keyscan"
)

// MaxInfoHolds is the most live holds one Info call reads to split held
// from confirmed (the earliest to end): past it, Info.Partial is set and
// Held undercounts.
const MaxInfoHolds = 10_000

// Info is a budget's state now, for operators: Budget.Info.
type Info struct {
	Budget string
	// At is Redis TIME of the read.
	At time.Time
	// Holds is the number of live holds; Partial says more than
	// MaxInfoHolds were live, so CapInfo.Held counts only the first.
	Holds   int64
	Partial bool
	// Promotions, by ID.
	Promotions []PromotionInfo
}

// PromotionInfo is one promotion's caps now.
type PromotionInfo struct {
	ID         string
	MaxPerCart int64
	Caps       []CapInfo
	// Holds is the number of live holds naming the promotion.
	Holds int64
}

// CapInfo is one cap's counter now, in its current period.
type CapInfo struct {
	Cap Cap
	// Start and End bound the period counted now (zero for Ever).
	Start, End time.Time
	// Used is confirmed plus held (summed over values for a cap per
	// attribute); Held is what live holds count of it.
	Used, Held int64
	// Values is, for a cap per attribute, the number of values counted
	// (customers), and Most the most one of them used.
	Values, Most int64
	// Remaining is Limit - Used, or for a cap per attribute Limit - Most
	// (what the value nearest its cap has left); never below 0.
	Remaining int64
}

// Info reads the counters of the promotions named (every one defined,
// when none is), holds whose time has passed given back first: one
// script, O(counter fields + live holds read). It is for operators (the
// CLI, the console): a cart asks Remaining or Offers. Like Remaining it
// answers ErrLost when a counter it reads was evicted while the epoch
// stayed, rather than the whole cap left.
func (b *Budget) Info(ctx context.Context, promotions ...string) (Info, error) {
	ps, err := b.infoPromotions(promotions)
	if err != nil {
		return Info{}, err
	}
	var (
		cs []infoCap
		rp reply
		at int64
	)
	for now, try := b.serverNow(), 0; ; try++ {
		cs = cs[:0]
		var suffixes []any
		for i, p := range ps {
			for j, c := range p.Caps {
				cc := infoCap{p: i, c: j, cands: candidates(p.ID, c, now), at: len(suffixes)}
				for _, x := range cc.cands {
					suffixes = append(suffixes, x.suffix)
				}
				cs = append(cs, cc)
			}
		}
		args := append([]any{b.o.RecordTTL.Milliseconds(), b.reportFlag(), MaxInfoHolds}, suffixes...)
		var err error
		rp, err = b.run(ctx, b.s.info, false, []string{b.k.base, b.k.epoch, b.k.holds, b.k.unrep, b.k.keyset}, args...)
		if rp == nil {
			return Info{}, err
		}
		switch rp.status() {
		case "lost":
			return Info{}, ErrLost
		case "ok":
		default:
			return Info{}, rp.unexpected("info")
		}
		at = rp.int(1)
		// The periods were picked by this process's estimate of Redis
		// TIME; off by more than a period (a tool's clock, before any
		// reply measured it), read again at Redis TIME, as Reserve does.
		if try > 0 || covers(cs, at) {
			break
		}
		now = ms(at)
	}
	counters, gone := reply(rp.list(2)), reply(rp.list(6))
	held := map[string]int64{}
	for h, i := reply(rp.list(3)), 0; i+2 < len(h); i += 3 {
		held[h.str(i)+"\t"+h.str(i+1)] = h.int(i + 2)
	}
	holdsOf := map[string]int64{}
	for h, i := reply(rp.list(4)), 0; i+1 < len(h); i += 2 {
		holdsOf[h.str(i)] = h.int(i + 1)
	}
	out := Info{Budget: b.name, At: ms(at), Holds: rp.int(5), Promotions: make([]PromotionInfo, len(ps))}
	out.Partial = out.Holds > MaxInfoHolds
	for i, p := range ps {
		out.Promotions[i] = PromotionInfo{ID: p.ID, MaxPerCart: p.MaxPerCart, Caps: make([]CapInfo, len(p.Caps)), Holds: holdsOf[p.ID]}
	}
	for _, cc := range cs {
		c := ps[cc.p].Caps[cc.c]
		ci := CapInfo{Cap: c}
		for k, x := range cc.cands {
			if x.start > at || at >= x.end {
				continue
			}
			if gone.int(cc.at+k) == 1 {
				// Evicted while the epoch stayed: it would read as 0,
				// the whole cap left (Reserve and Remaining say ErrLost).
				return Info{}, ErrLost
			}
			if c.Period != Ever {
				ci.Start, ci.End = ms(x.start), ms(x.end)
			}
			g := group(c)
			agg := reply(counters.list(cc.at + k))
			for j := 0; j+3 < len(agg); j += 4 {
				if agg.str(j) == g {
					ci.Used, ci.Values, ci.Most = agg.int(j+1), agg.int(j+2), agg.int(j+3)
				}
			}
			ci.Held = held[x.suffix+"\t"+g]
		}
		if c.Per == "" {
			ci.Values, ci.Most = 0, 0
			ci.Remaining = max(c.Limit-ci.Used, 0)
		} else {
			ci.Remaining = max(c.Limit-ci.Most, 0)
		}
		out.Promotions[cc.p].Caps[cc.c] = ci
	}
	return out, nil
}

// infoCap is one cap Info reads: its promotion and cap index, and its
// candidate periods, from index at of the suffixes sent.
type infoCap struct {
	p, c  int
	cands []cand
	at    int
}

// covers says whether every cap has a candidate period holding at.
func covers(cs []infoCap, at int64) bool {
	for _, c := range cs {
		ok := false
		for _, x := range c.cands {
			ok = ok || (x.start <= at && at < x.end)
		}
		if !ok {
			return false
		}
	}
	return true
}

// group is a cap's counter field without the attribute value.
func group(c Cap) string {
	f := field(c, nil)
	return strings.TrimSuffix(f, "=")
}

func (b *Budget) infoPromotions(ids []string) ([]Promotion, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if len(ids) == 0 {
		for id := range b.promos {
			ids = append(ids, id)
		}
	}
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	ps := make([]Promotion, 0, len(ids))
	for _, id := range ids {
		p, ok := b.promos[id]
		if !ok {
			return nil, invalid("promotion", "%q is not defined in budget %q", id, b.name)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// Promotions returns the IDs of the promotions defined, sorted.
func (b *Budget) Promotions() []string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	ids := make([]string, 0, len(b.promos))
	for id := range b.promos {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// OrderInfo is an order's record: Budget.Order.
type OrderInfo struct {
	Order string
	// State is Held until the hold ends (by Redis TIME), then Expired
	// even before a script purges it.
	State      State
	Attributes map[string]string
	Lines      []Line
	// Reserved is when the hold was made, Expires when it ends, Confirmed
	// when it was confirmed (zero unless State is Confirmed).
	Reserved, Expires, Confirmed time.Time
}

// Order reads the record of order (its holds): ErrNotFound when there is
// none (never reserved, or it outlived Options.RecordTTL). It writes
// nothing.
func (b *Budget) Order(ctx context.Context, order string) (OrderInfo, error) {
	if err := b.checkOrder(order); err != nil {
		return OrderInfo{}, err
	}
	pipe := b.c.Pipeline()
	cmd := pipe.HGetAll(ctx, b.k.record(order))
	// Redis TIME, not this process's estimate of it (a tool's fresh Open
	// has measured no offset), judges whether the hold has ended.
	tm := pipe.Time(ctx)
	if _, err := pipe.Exec(ctx); err != nil {
		return OrderInfo{}, err
	}
	r := cmd.Val()
	if len(r) == 0 {
		return OrderInfo{}, fmt.Errorf("%w: order %q", ErrNotFound, order)
	}
	attrs, lines, err := DecodeRequest(r["req"])
	if err != nil {
		return OrderInfo{}, err
	}
	num := func(f string) time.Time {
		var n int64
		if _, err := fmt.Sscan(r[f], &n); err != nil || n == 0 {
			return time.Time{}
		}
		return ms(n)
	}
	oi := OrderInfo{Order: order, State: states[r["st"]], Attributes: attrs, Lines: lines,
		Reserved: num("at"), Expires: num("exp"), Confirmed: num("ct")}
	if oi.State == Held && !oi.Expires.After(tm.Val()) {
		oi.State = Expired
	}
	return oi, nil
}

// defsKey holds the published definitions (Publish).
func (k keys) defs() string { return k.base + "defs" }

// capDef and promoDef are a promotion's definition as published.
type capDef struct {
	Measure  string `json:"measure"`
	Limit    int64  `json:"limit"`
	Per      string `json:"per,omitempty"`
	Period   string `json:"period,omitempty"`
	Location string `json:"location,omitempty"`
	// Offset (seconds east of UTC) is set for a fixed zone whose name
	// does not load (time.FixedZone): Open makes the same fixed zone.
	Offset *int `json:"offset,omitempty"`
}

type promoDef struct {
	MaxPerCart int64    `json:"max_per_cart,omitempty"`
	Caps       []capDef `json:"caps"`
}

var (
	measureNames = map[Measure]string{Uses: "uses", Spend: "spend"}
	periodNames  = map[Period]string{Day: "day", Week: "week", Month: "month"}
)

// Publish writes the promotions defined now to Redis (the key Keys()[0]
// + "defs", replaced whole), so that operators' tools that do not hold
// the definitions (the tierset CLI and console) can Open the budget and
// read its caps. Call it after New and every Define; the caps a call
// checks are always the process's own.
func (b *Budget) Publish(ctx context.Context) error {
	b.mu.RLock()
	args := make([]any, 0, 2*len(b.promos))
	for id, p := range b.promos {
		d := promoDef{MaxPerCart: p.MaxPerCart, Caps: make([]capDef, len(p.Caps))}
		for i, c := range p.Caps {
			d.Caps[i] = capDef{Measure: measureNames[c.Measure], Limit: c.Limit, Per: c.Per, Period: periodNames[c.Period]}
			if c.Period != Ever {
				d.Caps[i].Location, d.Caps[i].Offset = zoneDef(c.Location)
			}
		}
		js, err := json.Marshal(d)
		if err != nil { // strings and integers only: cannot fail
			b.mu.RUnlock()
			return fmt.Errorf("budget: publish: %w", err)
		}
		args = append(args, id, string(js))
	}
	b.mu.RUnlock()
	return b.s.publish.Run(ctx, b.c, []string{b.k.defs()}, args...).Err()
}

// Open returns the budget called name with the promotions its Publish
// wrote: for operators' tools (Info, Order), which do not hold the
// definitions. A budget never published opens with no promotions.
func Open(ctx context.Context, c Client, name string, opts Options) (*Budget, error) {
	opts.Promotions = nil
	b, err := New(c, name, opts)
	if err != nil {
		return nil, err
	}
	pipe := c.Pipeline()
	cmd := pipe.HGetAll(ctx, b.k.defs())
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var ps []Promotion
	for id, js := range cmd.Val() {
		var d promoDef
		if err := json.Unmarshal([]byte(js), &d); err != nil {
			return nil, fmt.Errorf("budget: open %q: promotion %q: %w", name, id, err)
		}
		p := Promotion{ID: id, MaxPerCart: d.MaxPerCart}
		for _, cd := range d.Caps {
			cp := Cap{Limit: cd.Limit, Per: cd.Per}
			for m, s := range measureNames {
				if s == cd.Measure {
					cp.Measure = m
				}
			}
			for pd, s := range periodNames {
				if s == cd.Period {
					cp.Period = pd
				}
			}
			if cd.Offset != nil {
				cp.Location = time.FixedZone(cd.Location, *cd.Offset)
			} else if cd.Location != "" {
				if cp.Location, err = time.LoadLocation(cd.Location); err != nil {
					return nil, fmt.Errorf("budget: open %q: promotion %q: %w", name, id, err)
				}
			}
			p.Caps = append(p.Caps, cp)
		}
		ps = append(ps, p)
	}
	if err := b.Define(ps...); err != nil {
		return nil, fmt.Errorf("budget: open %q: %w", name, err)
	}
	return b, nil
}

// zoneDef is how Publish writes loc: its name, and its offset when the
// name does not load and the zone is fixed (time.FixedZone), so that Open
// builds the same zone instead of failing on the name.
func zoneDef(loc *time.Location) (string, *int) {
	name := loc.String()
	if _, err := time.LoadLocation(name); err == nil && name != "" {
		return name, nil
	}
	_, jan := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).In(loc).Zone()
	_, jul := time.Date(2000, 7, 1, 0, 0, 0, 0, time.UTC).In(loc).Zone()
	if jan != jul {
		return name, nil // not fixed: Open reports the name it cannot load
	}
	return name, &jan
}

// List returns the names of the budgets under prefix (default
// "tierset") that Rebuild built or Publish wrote: those with an epoch key
// or published definitions, sorted, so a published budget whose epoch was
// lost (it answers ErrLost) is still listed. It scans every master of a
// cluster.
func List(ctx context.Context, c redis.UniversalClient, prefix string) ([]string, error) {
	if prefix == "" {
		prefix = keyname.DefaultPrefix
	}
	if err := keyname.Check(prefix); err != nil {
		return nil, invalid("prefix", "%w", err)
	}
	if nilClient(c) {
		return nil, invalid("client", "nil client")
	}
	var names []string
	start := prefix + ":{b:"
	for _, suffix := range []string{"}:epoch", "}:defs"} {
		keys, err := keyscan.Keys(ctx, c, start+"*"+suffix)
		if err != nil {
			return nil, err
		}
		for _, key := range keys {
			if n := strings.TrimSuffix(strings.TrimPrefix(key, start), suffix); !strings.ContainsAny(n, "{}") {
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}
