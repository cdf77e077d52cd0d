package budget

import (
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/keyname"
	"github.com/tierset/tierset/internal/redisconf"
	"github.com/tierset/tierset/score"
)

// Client is what a Budget needs of go-redis: scripts, and pipelines (to
// send WAIT after a write on the same connection, and for
// RemainingPipe). *redis.Client and *redis.ClusterClient both are one.
type Client interface {
	redis.Scripter
	Pipeline() redis.Pipeliner
}

// Limits of the inputs.
const (
	// MaxLines is the most lines (promotions) one reservation names.
	MaxLines = 64
	// MaxOrderBytes is the longest order ID.
	MaxOrderBytes = 200
	// MaxValueBytes is the longest attribute value.
	MaxValueBytes = 200
	// MaxAmount is the largest amount, limit or count: 2^53, the largest
	// integer a Redis score and a Lua number hold exactly.
	MaxAmount = score.MaxExact
	// DefaultMaxHold is Options.MaxHold's default.
	DefaultMaxHold = 24 * time.Hour
	// DefaultMaxBatch is Options.MaxBatch's default.
	DefaultMaxBatch = 64
)

// Measure is what a cap counts.
type Measure uint8

const (
	// Uses counts applications of the promotion (Line.Uses).
	Uses Measure = iota + 1
	// Spend counts the discount given, in integer minor units (Line.Amount).
	Spend
)

// Period is the calendar period a cap is counted in.
type Period uint8

const (
	// Ever: the cap counts for the promotion's whole life.
	Ever Period = iota
	// Day, Week (Monday to Monday) and Month start at local midnight in
	// the cap's Location, so a day across a DST change is 23 or 25 hours.
	Day
	Week
	Month
)

// Cap is one limit of a promotion.
type Cap struct {
	Measure Measure
	// Limit is the most the counter may reach: 0..MaxAmount.
	Limit int64
	// Per, when set, counts per value of the named attribute (Medusa's
	// use_by_attribute): "customer" counts per Request.Attributes
	// ["customer"]. Empty: one counter for the promotion. A name is
	// UTF-8 without control characters, '=' or '@' (as Request.Attributes).
	Per string
	// Period and Location: a cap per calendar period (Ever by default)
	// needs its zone, named by the caller; periods are judged by Redis
	// TIME.
	Period   Period
	Location *time.Location
}

func (c Cap) String() string {
	var b strings.Builder
	b.WriteString(map[Measure]string{Uses: "uses", Spend: "spend"}[c.Measure])
	if c.Per != "" {
		b.WriteString(" per " + c.Per)
	}
	if c.Period != Ever {
		fmt.Fprintf(&b, " per %s in %s", map[Period]string{Day: "day", Week: "week", Month: "month"}[c.Period], c.Location)
	}
	return b.String()
}

// Promotion is a promotion's caps. Every cap must allow a reservation for
// it to be made.
type Promotion struct {
	// ID: 1..128 bytes, no whitespace, control, brace, glob character or
	// colon (it goes into key names).
	ID   string
	Caps []Cap
	// MaxPerCart, when > 0, is the most uses one reservation may ask.
	MaxPerCart int64
}

// Options configures a Budget. The zero value means every default.
type Options struct {
	// Prefix of every key. Defaults to "tierset".
	Prefix string
	// Promotions the budget knows; Define adds more. A Reserve naming any
	// other is refused.
	Promotions []Promotion
	// MaxHold is the longest hold a Reserve may ask. Defaults to 24h.
	MaxHold time.Duration
	// RecordTTL is how long an order's record outlives its end
	// (confirmed, released or expired): the window in which Reserve,
	// Confirm and Release of it answer idempotently. Defaults to 24h.
	RecordTTL time.Duration
	// LogMax bounds the confirmation log (an approximate XADD MAXLEN).
	// Defaults to 100,000 entries.
	LogMax int64
	// Expiry, when set, reports holds that end unconfirmed: Reserve
	// enqueues a task keyed by the order, token ExpiryToken + ":" + the
	// hold's expiry in ms, due when the hold ends; its handler calls
	// Expire. Sweep enqueues again what was lost. Defaults to nil (holds
	// still end on time; nothing is reported).
	Expiry *delay.Queue
	// ExpiryToken starts the token of every expiry task. Defaults to
	// "budget-expiry".
	ExpiryToken string
	// ReportGrace is how long after a hold ends Sweep waits for its report
	// before it enqueues it again. Defaults to 1 minute.
	ReportGrace time.Duration
	// Replicas, when > 0, sends WAIT Replicas ReplicaTimeout after every
	// write, on its connection; fewer acknowledgements return
	// ErrNotReplicated along with the outcome. Defaults to 0 (off).
	Replicas int
	// ReplicaTimeout bounds that WAIT. Defaults to 100ms. Keep it well
	// under the client's ReadTimeout: a WAIT still blocked when the read
	// of its reply times out is ErrNotReplicated too, but only after
	// go-redis's retries sent the write and WAIT again, each waiting out
	// ReadTimeout.
	ReplicaTimeout time.Duration
	// Logger gets what fails beside a call (an expiry task that could not
	// be enqueued). Defaults to slog.Default().
	Logger *slog.Logger
	// Observer receives grants, refusals and expired holds (metrics).
	// Its callbacks must return promptly and must not call the Budget:
	// a batched grant's is called on the batch's goroutine while the
	// batch holds the Budget's slot, so one that blocks stalls every
	// Reserve of the Budget. Defaults to none.
	Observer Observer
	// MaxBatch bounds how many concurrent Reserve calls of this Budget in
	// this process one script judges (group commit): a call made while
	// none is in flight goes at once, those made meanwhile go together in
	// the next, each granted or refused on its own. 1 sends every
	// call alone; at most 1000. Defaults to DefaultMaxBatch (64).
	MaxBatch int
}

func (o Options) withDefaults() (Options, error) {
	if o.Prefix == "" {
		o.Prefix = keyname.DefaultPrefix
	}
	if err := keyname.Check(o.Prefix); err != nil {
		return o, invalid("prefix", "%w", err)
	}
	pos := []struct {
		name string
		d    *time.Duration
		def  time.Duration
	}{
		{"MaxHold", &o.MaxHold, DefaultMaxHold},
		{"RecordTTL", &o.RecordTTL, 24 * time.Hour},
		{"ReportGrace", &o.ReportGrace, time.Minute},
		{"ReplicaTimeout", &o.ReplicaTimeout, 100 * time.Millisecond},
	}
	for _, p := range pos {
		if *p.d == 0 {
			*p.d = p.def
		}
		if *p.d < time.Millisecond {
			return o, invalid("options", "%s %v (at least 1ms)", p.name, *p.d)
		}
	}
	if o.LogMax == 0 {
		o.LogMax = 100_000
	}
	if o.LogMax < 0 || o.Replicas < 0 {
		return o, invalid("options", "LogMax %d, Replicas %d (neither may be negative)", o.LogMax, o.Replicas)
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.MaxBatch < 1 || o.MaxBatch > 1000 {
		return o, invalid("options", "MaxBatch %d (allowed 1..1000)", o.MaxBatch)
	}
	if o.ExpiryToken == "" {
		o.ExpiryToken = "budget-expiry"
	}
	if err := checkText(o.ExpiryToken, 100); err != nil || strings.Contains(o.ExpiryToken, ",") {
		return o, invalid("options", "ExpiryToken %q (1..100 bytes, no control characters or comma)", o.ExpiryToken)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// Budget is the caps of a set of promotions in Redis, under one hash tag
// {b:<name>}: every counter, hold and record of it is on one Cluster slot,
// so a reservation over any of its promotions is one script. Spread load
// over a cluster by splitting promotions across Budgets (per store or
// market); a cart's promotions must belong to one Budget.
type Budget struct {
	c    Client
	name string
	o    Options
	k    keys
	s    *scripts

	mu     sync.RWMutex
	promos map[string]Promotion

	// offsetMs is Redis TIME minus the client clock, measured on every
	// reply: periods are computed for Redis's now, not the client's.
	offsetMs atomic.Int64
	// batch queues concurrent Reserve calls (batch.go).
	batch batcher
	// loaded: remaining.lua is known to be on the server (RemainingPipe
	// sends EVALSHA then, the full script otherwise).
	loaded atomic.Bool
}

// New returns the budget called name on c. It validates its arguments and
// sends nothing; a go-redis client built without ContextTimeoutEnabled is
// refused (ctx deadlines would not reach its socket). A new budget refuses every call with ErrLost until
// Rebuild (with no redemptions, for a fresh one) builds it.
func New(c Client, name string, opts Options) (*Budget, error) {
	if nilClient(c) {
		return nil, invalid("options", "nil client")
	}
	if err := keyname.Check(name); err != nil {
		return nil, invalid("name", "%w", err)
	}
	// A reservation's ctx deadline must bound it: a caller at checkout
	// cannot wait out ReadTimeout on a stalled server.
	if err := redisconf.CheckDeadlines(c); err != nil {
		return nil, invalid("options", "%w", err)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	b := &Budget{c: c, name: name, o: o, k: newKeys(o.Prefix, name), s: newScripts(), promos: map[string]Promotion{}}
	if err := b.Define(o.Promotions...); err != nil {
		return nil, err
	}
	b.o.Promotions = nil
	return b, nil
}

// Name returns the budget's name.
func (b *Budget) Name() string { return b.name }

// Define adds promotions, or replaces those with the same ID: later calls
// check the new caps. All are validated first; a refused one defines none.
func (b *Budget) Define(ps ...Promotion) error {
	for _, p := range ps {
		if err := checkPromotion(p); err != nil {
			return err
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range ps {
		p.Caps = append([]Cap(nil), p.Caps...)
		b.promos[p.ID] = p
	}
	return nil
}

// Promotion returns the promotion defined under id.
func (b *Budget) Promotion(id string) (Promotion, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	p, ok := b.promos[id]
	return p, ok
}

// nilClient reports a nil client, typed nils included: a nil
// *redis.Client in the interface is not == nil, and its first use would
// dereference it.
func nilClient(c Client) bool {
	if c == nil {
		return true
	}
	v := reflect.ValueOf(c)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

func checkPromotion(p Promotion) error {
	if err := keyname.Check(p.ID); err != nil || strings.Contains(p.ID, ":") {
		if err == nil {
			err = fmt.Errorf("%q holds a colon", p.ID)
		}
		return invalid("promotion", "%w", err)
	}
	if p.MaxPerCart < 0 || p.MaxPerCart > MaxAmount {
		return invalid("cap", "promotion %q: MaxPerCart %d (allowed 0..2^53)", p.ID, p.MaxPerCart)
	}
	for i, c := range p.Caps {
		switch {
		case c.Measure != Uses && c.Measure != Spend:
			return invalid("cap", "promotion %q cap %d: measure %d (Uses or Spend)", p.ID, i, c.Measure)
		case c.Limit < 0 || c.Limit > MaxAmount:
			return invalid("cap", "promotion %q cap %d: limit %d (allowed 0..2^53)", p.ID, i, c.Limit)
		case c.Period > Month:
			return invalid("cap", "promotion %q cap %d: period %d", p.ID, i, c.Period)
		case c.Period != Ever && c.Location == nil:
			return invalid("location", "promotion %q cap %d: a period cap needs its Location", p.ID, i)
		}
		if c.Per != "" {
			// UTF-8, as a request's attribute names must be: a cap per a
			// name no request can carry would refuse every Reserve.
			if err := checkText(c.Per, keyname.MaxBytes); err != nil || strings.ContainsAny(c.Per, "=@") || !utf8.ValidString(c.Per) {
				return invalid("cap", "promotion %q cap %d: attribute name %q (UTF-8, no control characters, '=' or '@')", p.ID, i, c.Per)
			}
		}
	}
	return nil
}

// checkText refuses an empty or too long string and control characters
// (tab and newline delimit the records scripts parse).
func checkText(s string, max int) error {
	if s == "" || len(s) > max {
		return fmt.Errorf("length %d (allowed 1..%d)", len(s), max)
	}
	if i := strings.IndexFunc(s, unicode.IsControl); i >= 0 {
		return fmt.Errorf("control character at byte %d", i)
	}
	return nil
}

// keys is the layout of a budget; docs/design.md ("Budgets") has the
// table. base never exists: scripts derive counter and record keys from
// it, after the hash tag, so on its slot.
type keys struct {
	base, epoch, holds, unrep, log, keyset string
}

func newKeys(prefix, name string) keys {
	b := prefix + ":{b:" + name + "}:"
	return keys{base: b, epoch: b + "epoch", holds: b + "holds", unrep: b + "unrep", log: b + "log", keyset: b + "keys"}
}

func (k keys) record(order string) string { return k.base + "o:" + order }

// Keys lists the budget's fixed keys; counters, records and "prev" (the
// epoch the last Rebuild replaced) are Keys()[0] (the base) + a suffix.
func (b *Budget) Keys() []string {
	return []string{b.k.base, b.k.epoch, b.k.holds, b.k.unrep, b.k.log, b.k.keyset}
}

// LogKey is the stream of confirmations a ledger is written from: each
// entry has ev=confirm, order, at (Redis TIME ms), req (the request, see
// DecodeRequest) and epoch.
func (b *Budget) LogKey() string { return b.k.log }

const forever = int64(1) << 53 // the end of a cap with no period
