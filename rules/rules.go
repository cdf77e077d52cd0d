package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/text"
	"github.com/tierset/tierset/score"
)

// Version is the only file format version this package reads.
const Version = 1

// DefaultMaxBytes is the input cap when Options.MaxBytes is zero.
const DefaultMaxBytes int64 = 32 << 20

// DefaultMaxErrors is the error cap when Options.MaxErrors is zero.
const DefaultMaxErrors = 20

// MaxNumberLen bounds the characters of one number (sign, digits and
// point): far beyond any real amount, short enough that a hostile file
// cannot make decimal arithmetic slow. It is score's bound.
const MaxNumberLen = score.MaxNumberLen

// Options tune Parse. The zero value is ready to use.
type Options struct {
	// MaxBytes refuses inputs larger than this many bytes before they are
	// parsed. Zero means DefaultMaxBytes (32 MiB); negative is not allowed
	// and behaves like zero.
	MaxBytes int64
	// MaxErrors bounds how many problems one Parse reports (joined with
	// errors.Join). Zero means DefaultMaxErrors (20).
	MaxErrors int
}

func (o Options) maxBytes() int64 {
	if o.MaxBytes <= 0 {
		return DefaultMaxBytes
	}
	return o.MaxBytes
}

func (o Options) maxErrors() int {
	if o.MaxErrors <= 0 {
		return DefaultMaxErrors
	}
	return o.MaxErrors
}

// ParseFile opens path and parses it with Parse, naming errors after
// path as given. A file whose size already exceeds the cap is refused
// without being read.
func ParseFile(path string, opts Options) ([]gradient.Promotion, error) {
	name := path
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > opts.maxBytes() {
		return nil, tooLarge(name, opts.maxBytes(), fmt.Sprintf("%d bytes", st.Size()))
	}
	return Parse(f, name, opts)
}

func tooLarge(name string, max int64, got string) error {
	return &Error{File: name, PromotionIndex: -1, TierIndex: -1, Err: ErrTooLarge,
		Detail: fmt.Sprintf("input is larger than the %d-byte limit (%s)", max, got)}
}

// Parse reads a rules file (see the package documentation for the
// format), checks every promotion with gradient's Validate and returns
// the promotions in file order. name labels the errors. On any problem it
// returns no promotions and an error: one *Error, or several joined with
// errors.Join (use errors.As to reach the first).
func Parse(r io.Reader, name string, opts Options) ([]gradient.Promotion, error) {
	max := opts.maxBytes()
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("rules: read %s: %w", name, err)
	}
	if int64(len(data)) > max {
		return nil, tooLarge(name, max, "more than that was read")
	}
	return parseBytes(data, name, opts)
}

type fileWire struct {
	Version    *int              `json:"version"`
	Promotions []json.RawMessage `json:"promotions"`
}

type promotionWire struct {
	ID          string            `json:"id"`
	Note        string            `json:"note"`
	Metric      string            `json:"metric"`
	MinorDigits *int              `json:"minor_digits"`
	Kind        string            `json:"kind"`
	Start       string            `json:"start"`
	End         string            `json:"end"`
	Revision    int64             `json:"revision"`
	Tiers       []json.RawMessage `json:"tiers"`
}

type tierWire struct {
	ID         string            `json:"id"`
	Threshold  json.RawMessage   `json:"threshold"`
	MatchValue json.RawMessage   `json:"match_value"`
	Reward     json.RawMessage   `json:"reward"`
	Gifts      []json.RawMessage `json:"gifts"`
}

type rewardWire struct {
	Kind    string          `json:"kind"`
	Percent json.RawMessage `json:"percent"`
	Amount  json.RawMessage `json:"amount"`
	Step    json.RawMessage `json:"step"`
	Cap     json.RawMessage `json:"cap"`
}

type giftWire struct {
	SKU  string `json:"sku"`
	Qty  *int   `json:"qty"`
	Name string `json:"name"`
}

// Names used in the file for gradient's enums.
var (
	metricNames = map[string]gradient.Metric{"quantity": gradient.Quantity, "amount": gradient.Amount}
	kindNames   = map[string]gradient.RuleKind{"threshold": gradient.Threshold, "parity_price": gradient.ParityPrice, "parity_discount": gradient.ParityDiscount}
	rewardNames = map[string]gradient.RewardKind{"percent_off": gradient.PercentOff, "amount_off": gradient.AmountOff, "fixed_price": gradient.FixedPrice, "every_n": gradient.EveryN}
)

// MetricName gives a rules file's name for a metric ("quantity").
func MetricName(m gradient.Metric) string { return nameOf(metricNames, m) }

// KindName gives a rules file's name for a rule kind ("parity_price").
func KindName(k gradient.RuleKind) string { return nameOf(kindNames, k) }

// RewardName gives a rules file's name for a reward kind ("percent_off").
func RewardName(k gradient.RewardKind) string { return nameOf(rewardNames, k) }

func nameOf[T comparable](m map[string]T, v T) string {
	for k, x := range m {
		if x == v {
			return k
		}
	}
	return fmt.Sprint(v)
}

// parser collects errors for one file.
type parser struct {
	name string
	max  int
	errs []error
}

func (p *parser) full() bool { return len(p.errs) >= p.max }

func (p *parser) add(e *Error) {
	if p.full() {
		return
	}
	e.File = p.name
	p.errs = append(p.errs, e)
}

// at is where an error is: a promotion and maybe a tier.
type at struct {
	pi    int
	promo string
	ti    int
	tier  string
}

func (a at) err(field string, sentinel error, format string, args ...any) *Error {
	return &Error{PromotionIndex: a.pi, Promotion: a.promo, TierIndex: a.ti, TierID: a.tier,
		Field: field, Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}

var fileAt = at{pi: -1, ti: -1}

func parseBytes(data []byte, name string, opts Options) ([]gradient.Promotion, error) {
	p := &parser{name: name, max: opts.maxErrors()}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	// Check the syntax of the whole input first: json.Unmarshal validates
	// everything (trailing garbage included) before decoding, and its
	// offsets are absolute, which gives line:column.
	if !p.checkLengths(data) {
		return nil, p.result()
	}
	var probe json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := lineCol(data, se.Offset)
			e := fileAt.err("", fmt.Errorf("%w: %w", ErrSyntax, se), "JSON syntax error: %s", strings.TrimPrefix(se.Error(), "json: "))
			e.Line, e.Column = line, col
			p.add(e)
			return nil, p.result()
		}
		p.add(fileAt.err("", fmt.Errorf("%w: %w", ErrSyntax, err), "JSON syntax error: %v", err))
		return nil, p.result()
	}
	if !p.checkShape(data) {
		return nil, p.result()
	}
	var fw fileWire
	if !p.strict(fileAt, "", data, &fw) {
		return nil, p.result()
	}
	switch {
	case fw.Version == nil:
		p.add(fileAt.err("version", ErrMissing, "version is required (this reader knows version %d)", Version))
	case *fw.Version != Version:
		p.add(fileAt.err("version", ErrVersion, "version %d is not supported (this reader knows version %d)", *fw.Version, Version))
	}
	if len(fw.Promotions) == 0 {
		p.add(fileAt.err("promotions", ErrEmpty, "promotions: the file has no promotions"))
	}
	if len(p.errs) > 0 {
		return nil, p.result()
	}
	out := make([]gradient.Promotion, 0, len(fw.Promotions))
	seen := make(map[string]int, len(fw.Promotions))
	for i, raw := range fw.Promotions {
		if p.full() {
			break
		}
		promo, ok := p.promotion(i, raw)
		if !ok {
			continue
		}
		if j, dup := seen[promo.ID]; dup {
			p.add(at{pi: i, promo: promo.ID, ti: -1}.err("id", ErrDuplicatePromotion,
				"id %q is also the id of promotions[%d] (ids must be unique in a file)", promo.ID, j))
			continue
		}
		seen[promo.ID] = i
		out = append(out, promo)
	}
	if len(p.errs) > 0 {
		return nil, p.result()
	}
	return out, nil
}

func (p *parser) result() error {
	if len(p.errs) == 1 {
		return p.errs[0]
	}
	return errors.Join(p.errs...)
}

func (p *parser) promotion(i int, raw json.RawMessage) (gradient.Promotion, bool) {
	a := at{pi: i, promo: peekID(raw), ti: -1}
	var w promotionWire
	if !p.strict(a, "", raw, &w) {
		return gradient.Promotion{}, false
	}
	before := len(p.errs)
	promo := gradient.Promotion{ID: w.ID}
	if w.ID == "" {
		p.add(a.err("id", ErrMissing, "id is required"))
	}
	if m, ok := metricNames[w.Metric]; ok {
		promo.Metric = m
	} else if w.Metric == "" {
		p.add(a.err("metric", ErrMissing, `metric is required ("quantity" or "amount")`))
	} else {
		p.add(a.err("metric", fmt.Errorf("%w: %w", ErrEnum, gradient.ErrBadMetric), `metric %s is neither "quantity" nor "amount"`, text.Quote(w.Metric)))
	}
	switch d := w.MinorDigits; {
	case d == nil:
		// Absent: the default, as the zero MinorDigits of a Promotion.
	case *d == 0:
		// Refused rather than read as the default: files written for the
		// first format used 0 for a currency without minor units.
		p.add(a.err("minor_digits", fmt.Errorf("%w: %w", ErrType, score.ErrMinorDigits),
			"minor_digits 0 is ambiguous: write -1 for a currency without minor units (JPY), or leave it out for %d", gradient.DefaultMinorDigits))
	case *d < gradient.NoMinorDigits || *d > score.MaxMinorDigits:
		p.add(a.err("minor_digits", fmt.Errorf("%w: %w", ErrType, score.ErrMinorDigits),
			"minor_digits %d is outside 1..%d (-1 for none, absent for %d)", *d, score.MaxMinorDigits, gradient.DefaultMinorDigits))
	default:
		promo.MinorDigits = *d
	}
	switch k, ok := kindNames[w.Kind]; {
	case w.Kind == "":
		promo.Kind = gradient.Threshold
	case ok:
		promo.Kind = k
	default:
		p.add(a.err("kind", fmt.Errorf("%w: %w", ErrEnum, gradient.ErrBadMetric), `kind %s is not one of "threshold", "parity_price", "parity_discount"`, text.Quote(w.Kind)))
	}
	promo.Start = p.timeField(a, "start", w.Start)
	promo.End = p.timeField(a, "end", w.End)
	promo.Revision = w.Revision // negative: refused by Validate below
	if len(p.errs) > before {
		return gradient.Promotion{}, false
	}
	if len(w.Tiers) == 0 {
		p.add(a.err("tiers", fmt.Errorf("%w: %w", ErrMissing, gradient.ErrNoTiers), "tiers: at least one tier is required"))
		return gradient.Promotion{}, false
	}
	if len(w.Tiers) > gradient.MaxTiers {
		p.add(a.err("tiers", gradient.ErrTooManyTiers, "tiers: %d tiers (max %d)", len(w.Tiers), gradient.MaxTiers))
		return gradient.Promotion{}, false
	}
	promo.Tiers = make([]gradient.Tier, len(w.Tiers))
	for ti, traw := range w.Tiers {
		if p.full() {
			return gradient.Promotion{}, false
		}
		p.tier(at{pi: i, promo: promo.ID, ti: ti, tier: peekID(traw)}, &promo, traw, &promo.Tiers[ti])
	}
	if len(p.errs) > before {
		return gradient.Promotion{}, false
	}
	if err := promo.Validate(); err != nil {
		p.add(fromValidation(a, &promo, err))
		return gradient.Promotion{}, false
	}
	return promo, true
}

func (p *parser) timeField(a at, field, s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		p.add(a.err(field, fmt.Errorf("%w: %w", ErrTime, err), "%s %s is not an RFC 3339 time (e.g. 2026-12-01T00:00:00+08:00)", field, text.Quote(s)))
	}
	return t
}

func (p *parser) tier(a at, promo *gradient.Promotion, raw json.RawMessage, t *gradient.Tier) {
	var w tierWire
	if !p.strict(a, "", raw, &w) {
		return
	}
	t.ID = w.ID
	if w.ID == "" {
		p.add(a.err("id", ErrMissing, "id is required"))
	}
	matchField, other := "threshold", "match_value"
	matchRaw, otherRaw := w.Threshold, w.MatchValue
	if promo.Kind != gradient.Threshold {
		matchField, other = other, matchField
		matchRaw, otherRaw = otherRaw, matchRaw
	}
	if present(otherRaw) {
		p.add(a.err(other, ErrUnknownField, "%s is not used by promotion kind %q (it matches on %s)", other, KindName(promo.Kind), matchField))
	}
	v, ok := p.number(a, matchField, matchRaw, true)
	if ok {
		p.checkMatchValue(a, promo, matchField, v)
	}
	if promo.Kind == gradient.Threshold {
		t.Threshold = v
	} else {
		t.MatchValue = v
	}
	if !present(w.Reward) {
		p.add(a.err("reward", ErrMissing, "reward is required"))
	} else {
		p.reward(a, promo, w.Reward, &t.Reward)
	}
	for g, graw := range w.Gifts {
		field := fmt.Sprintf("gifts[%d]", g)
		var gw giftWire
		if !p.strict(a, field, graw, &gw) {
			continue
		}
		if gw.Qty == nil {
			p.add(a.err(field+".qty", ErrMissing, "%s.qty is required", field))
			continue
		}
		t.Gifts = append(t.Gifts, gradient.Gift{SKU: gw.SKU, Qty: *gw.Qty, Name: gw.Name})
	}
}

// checkMatchValue gives the precise messages for the commonest threshold
// mistakes; gradient's Validate re-checks everything afterwards.
func (p *parser) checkMatchValue(a at, promo *gradient.Promotion, field string, v decimal.Decimal) {
	shown := v.String()
	switch {
	case v.Sign() <= 0:
		p.add(a.err(field, gradient.ErrThreshold, "%s %q must be > 0", field, shown))
	case promo.Metric == gradient.Quantity && !v.IsInteger():
		p.add(a.err(field, fmt.Errorf("%w: %w", gradient.ErrThreshold, score.ErrTooPrecise), "%s %q must be a whole item count for a quantity promotion", field, shown))
	case promo.Metric == gradient.Amount && fracDigits(v) > gradient.Digits(promo.MinorDigits):
		p.add(a.err(field, fmt.Errorf("%w: %w", gradient.ErrThreshold, score.ErrTooPrecise), "%s %q has %d fractional digits, currency allows %d", field, shown, fracDigits(v), gradient.Digits(promo.MinorDigits)))
	}
}

func (p *parser) reward(a at, promo *gradient.Promotion, raw json.RawMessage, r *gradient.Reward) {
	var w rewardWire
	if !p.strict(a, "reward", raw, &w) {
		return
	}
	kind, ok := rewardNames[w.Kind]
	switch {
	case w.Kind == "":
		p.add(a.err("reward.kind", ErrMissing, `reward.kind is required ("percent_off", "amount_off", "fixed_price" or "every_n")`))
		return
	case !ok:
		p.add(a.err("reward.kind", fmt.Errorf("%w: %w", ErrEnum, gradient.ErrBadReward), `reward.kind %s is not one of "percent_off", "amount_off", "fixed_price", "every_n"`, text.Quote(w.Kind)))
		return
	}
	r.Kind = kind
	// Which fields each kind needs; the others must be absent, so a typo
	// in the kind cannot silently ignore an amount.
	need := map[string]bool{}
	switch kind {
	case gradient.PercentOff:
		need["percent"] = true
	case gradient.AmountOff, gradient.FixedPrice:
		need["amount"] = true
	case gradient.EveryN:
		need["amount"], need["step"] = true, true
	}
	fields := []struct {
		name  string
		raw   json.RawMessage
		dst   *decimal.Decimal
		money bool
	}{
		{"percent", w.Percent, &r.Percent, false},
		{"amount", w.Amount, &r.Amount, true},
		{"step", w.Step, &r.Step, promo.Metric == gradient.Amount},
		{"cap", w.Cap, &r.Cap, true},
	}
	for _, f := range fields {
		full := "reward." + f.name
		if f.name != "cap" && !need[f.name] {
			if present(f.raw) {
				p.add(a.err(full, ErrUnknownField, "%s is not used by reward kind %q", full, w.Kind))
			}
			continue
		}
		v, ok := p.number(a, full, f.raw, f.name != "cap")
		if !ok {
			continue
		}
		*f.dst = v
		switch {
		case v.Sign() < 0:
			p.add(a.err(full, gradient.ErrBadReward, "%s %q must not be negative", full, v.String()))
		case f.money && fracDigits(v) > gradient.Digits(promo.MinorDigits):
			p.add(a.err(full, fmt.Errorf("%w: %w", gradient.ErrBadReward, score.ErrTooPrecise), "%s %q has %d fractional digits, currency allows %d", full, v.String(), fracDigits(v), gradient.Digits(promo.MinorDigits)))
		}
	}
}

// fromValidation turns gradient's *ValidationError into an *Error that
// wraps it, with the file's field names.
func fromValidation(a at, promo *gradient.Promotion, err error) *Error {
	var ve *gradient.ValidationError
	if !errors.As(err, &ve) {
		return a.err("", err, "%v", err)
	}
	e := a.err(ve.Field, err, "%s: %s", ve.Field, ve.Detail)
	if ve.Field == "" {
		e.Detail = ve.Detail
	}
	if ve.TierIndex >= 0 {
		e.TierIndex = ve.TierIndex
		e.TierID = ve.TierID
	}
	if ve.Field == "window" {
		e.Field = "end" // gradient's detail already reads "end … is not after start …"
		e.Detail = ve.Detail
	}
	return e
}
