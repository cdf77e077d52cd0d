package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/shopspring/decimal"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/score"
)

// Member records. Every ZSET member is one msgpack array of memberFields
// elements, written with msgpack.Encoder primitives in a fixed order, so
// the bytes are deterministic (no maps) and each tier's member is unique
// (it carries the tier ID):
//
//	0 kind      uint  1 tier, 2 floor sentinel, 3 ceiling sentinel
//	1 tier ID   str   "" for sentinels
//	2 version   str   content hash of the promotion (16 hex)
//	3 metric    uint  gradient.Metric
//	4 digits    uint  minor digits
//	5 start     int   window start, Unix ms; math.MinInt64 when open
//	6 end       int   window end (exclusive), Unix ms; math.MaxInt64 when open
//	7 score     int   the tier's score (-1 floor, 2^53 ceiling)
//	8 gifts     bool  the tier has gifts in gifts:<version>
//	9 reward    uint  gradient.RewardKind (0 for sentinels)
//	10..13      str|nil  reward Percent, Amount, Step, Cap as decimal
//	                     strings (decimal.String), nil when zero; never floats
//
// The floor sentinel sits at score -1 and the ceiling at 2^53, so every
// ZRANGE on an existing promotion returns a versioned member: the floor
// when no tier is reached, the ceiling when there is no next tier.
const (
	memberFields = 14

	kindTier    = 1
	kindFloor   = 2
	kindCeiling = 3

	floorScore   = -1
	ceilingScore = score.MaxExact

	// maxDecimalLen bounds a decimal string in a record. Validated rewards
	// are far shorter; the bound keeps a corrupt record from smuggling a
	// decimal whose String() would allocate without limit.
	maxDecimalLen = 40

	openStart = math.MinInt64
	openEnd   = math.MaxInt64
)

// member is a decoded member record. Its strings point into the bytes
// read from Redis (no copies).
type member struct {
	kind     uint8
	tierID   string
	version  string
	metric   gradient.Metric
	digits   int
	startMs  int64
	endMs    int64
	score    int64
	hasGifts bool
	reward   gradient.Reward
}

func (m *member) active(nowMs int64) bool { return nowMs >= m.startMs && nowMs < m.endMs }

// scoreValue turns a score back into the metric value it encodes.
func (m *member) scoreValue(s int64) decimal.Decimal {
	if m.metric == gradient.Quantity {
		return decimal.NewFromInt(s)
	}
	return score.MinorToAmount(s, m.digits)
}

func windowMs(t time.Time, open int64) int64 {
	if t.IsZero() {
		return open
	}
	return t.UnixMilli()
}

func windowTime(ms int64) time.Time {
	if ms == openStart || ms == openEnd {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func encodeDecimal(enc *msgpack.Encoder, d decimal.Decimal) error {
	if d.IsZero() {
		return enc.EncodeNil()
	}
	return enc.EncodeString(d.String())
}

func encodeMember(buf *bytes.Buffer, m *member) error {
	buf.Reset()
	enc := msgpack.NewEncoder(buf)
	steps := []func() error{
		func() error { return enc.EncodeArrayLen(memberFields) },
		func() error { return enc.EncodeUint(uint64(m.kind)) },
		func() error { return enc.EncodeString(m.tierID) },
		func() error { return enc.EncodeString(m.version) },
		func() error { return enc.EncodeUint(uint64(m.metric)) },
		func() error { return enc.EncodeUint(uint64(m.digits)) },
		func() error { return enc.EncodeInt(m.startMs) },
		func() error { return enc.EncodeInt(m.endMs) },
		func() error { return enc.EncodeInt(m.score) },
		func() error { return enc.EncodeBool(m.hasGifts) },
		func() error { return enc.EncodeUint(uint64(m.reward.Kind)) },
		func() error { return encodeDecimal(enc, m.reward.Percent) },
		func() error { return encodeDecimal(enc, m.reward.Amount) },
		func() error { return encodeDecimal(enc, m.reward.Step) },
		func() error { return encodeDecimal(enc, m.reward.Cap) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// reader is a bounds-checked msgpack reader over a string, for the member
// record on the hot path. It allocates nothing: strings are substrings of
// the input, and every length is checked against the bytes that remain
// before it is used, so no hostile length can make it allocate. It knows
// only the types a member record uses; anything else is corrupt.
type reader struct {
	s   string
	i   int
	bad bool
}

func (r *reader) byte() byte {
	if r.bad || r.i >= len(r.s) {
		r.bad = true
		return 0
	}
	b := r.s[r.i]
	r.i++
	return b
}

func (r *reader) be(n int) uint64 {
	if r.bad || len(r.s)-r.i < n {
		r.bad = true
		return 0
	}
	var v uint64
	for k := 0; k < n; k++ {
		v = v<<8 | uint64(r.s[r.i+k])
	}
	r.i += n
	return v
}

func (r *reader) arrayLen() int {
	c := r.byte()
	switch {
	case c >= msgpcode.FixedArrayLow && c <= msgpcode.FixedArrayHigh:
		return int(c & msgpcode.FixedArrayMask)
	case c == msgpcode.Array16:
		return int(r.be(2))
	}
	r.bad = true
	return 0
}

func (r *reader) int() int64 {
	c := r.byte()
	switch {
	case c <= msgpcode.PosFixedNumHigh:
		return int64(c)
	case c >= msgpcode.NegFixedNumLow:
		return int64(int8(c))
	}
	switch c {
	case msgpcode.Uint8:
		return int64(r.be(1))
	case msgpcode.Uint16:
		return int64(r.be(2))
	case msgpcode.Uint32:
		return int64(r.be(4))
	case msgpcode.Uint64:
		v := r.be(8)
		if v > math.MaxInt64 {
			r.bad = true
		}
		return int64(v)
	case msgpcode.Int8:
		return int64(int8(r.be(1)))
	case msgpcode.Int16:
		return int64(int16(r.be(2)))
	case msgpcode.Int32:
		return int64(int32(r.be(4)))
	case msgpcode.Int64:
		return int64(r.be(8))
	}
	r.bad = true
	return 0
}

// small reads a non-negative integer no larger than max.
func (r *reader) small(max int64) int64 {
	v := r.int()
	if v < 0 || v > max {
		r.bad = true
		return 0
	}
	return v
}

func (r *reader) bool() bool {
	switch r.byte() {
	case msgpcode.True:
		return true
	case msgpcode.False:
		return false
	}
	r.bad = true
	return false
}

// str reads a string; ok is false for nil when nilOK.
func (r *reader) str(nilOK bool) (s string, ok bool) {
	c := r.byte()
	var n int
	switch {
	case c >= msgpcode.FixedStrLow && c <= msgpcode.FixedStrHigh:
		n = int(c & msgpcode.FixedStrMask)
	case c == msgpcode.Str8:
		n = int(r.be(1))
	case c == msgpcode.Str16:
		n = int(r.be(2))
	case c == msgpcode.Str32:
		n = int(r.be(4))
	case c == msgpcode.Nil && nilOK:
		return "", false
	default:
		r.bad = true
		return "", false
	}
	if r.bad || n > len(r.s)-r.i {
		r.bad = true
		return "", false
	}
	s = r.s[r.i : r.i+n]
	r.i += n
	return s, true
}

func (r *reader) decimal() decimal.Decimal {
	s, ok := r.str(true)
	if !ok || r.bad {
		return decimal.Decimal{}
	}
	if len(s) == 0 || len(s) > maxDecimalLen {
		r.bad = true
		return decimal.Decimal{}
	}
	for k := 0; k < len(s); k++ {
		if c := s[k]; (c < '0' || c > '9') && c != '.' && c != '-' {
			r.bad = true
			return decimal.Decimal{}
		}
	}
	if d, ok := parsePlainDecimal(s); ok {
		return d
	}
	d, err := decimal.NewFromString(s)
	if err != nil {
		r.bad = true
	}
	return d
}

// parsePlainDecimal parses -?digits[.digits] with at most 18 digits in
// all, the shape decimal.String writes for every real reward, straight
// into decimal.New: one allocation instead of NewFromString's parse into
// a big.Int. Anything else (more digits, odd forms) reports !ok and takes
// the general path, which also decides what is malformed.
func parsePlainDecimal(s string) (decimal.Decimal, bool) {
	i, neg := 0, false
	if i < len(s) && s[i] == '-' {
		neg, i = true, i+1
	}
	var coef int64
	digits, frac, dot := 0, 0, false
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			coef = coef*10 + int64(c-'0')
			digits++
			if dot {
				frac++
			}
		case c == '.' && !dot && digits > 0:
			dot = true
		default:
			return decimal.Decimal{}, false
		}
	}
	if digits == 0 || digits > 18 || (dot && frac == 0) {
		return decimal.Decimal{}, false
	}
	if neg {
		coef = -coef
	}
	return decimal.New(coef, -int32(frac)), true
}

// decodeMember decodes a member record read from Redis. It never panics
// and allocates nothing proportional to lengths claimed by the bytes;
// anything but a well-formed record consumed whole is ErrCorrupt.
func decodeMember(s string, maxBytes int) (m member, err error) {
	defer func() {
		if p := recover(); p != nil {
			m, err = member{}, fmt.Errorf("%w: member decode panicked: %v", ErrCorrupt, p)
		}
	}()
	if len(s) > maxBytes {
		return member{}, fmt.Errorf("%w: member of %d bytes (max %d)", ErrCorrupt, len(s), maxBytes)
	}
	r := reader{s: s}
	if r.arrayLen() != memberFields {
		return member{}, fmt.Errorf("%w: member is not a %d-element array", ErrCorrupt, memberFields)
	}
	m.kind = uint8(r.small(kindCeiling))
	m.tierID, _ = r.str(false)
	m.version, _ = r.str(false)
	m.metric = gradient.Metric(r.small(math.MaxUint8))
	m.digits = int(r.small(score.MaxMinorDigits))
	m.startMs = r.int()
	m.endMs = r.int()
	m.score = r.int()
	m.hasGifts = r.bool()
	m.reward.Kind = gradient.RewardKind(r.small(math.MaxUint8))
	m.reward.Percent = r.decimal()
	m.reward.Amount = r.decimal()
	m.reward.Step = r.decimal()
	m.reward.Cap = r.decimal()
	switch {
	case r.bad:
		return member{}, fmt.Errorf("%w: malformed member record", ErrCorrupt)
	case r.i != len(s):
		return member{}, fmt.Errorf("%w: %d trailing bytes after member record", ErrCorrupt, len(s)-r.i)
	case m.kind == 0 || m.version == "":
		return member{}, fmt.Errorf("%w: member without kind or version", ErrCorrupt)
	case m.metric != gradient.Quantity && m.metric != gradient.Amount:
		return member{}, fmt.Errorf("%w: member metric %d", ErrCorrupt, m.metric)
	case m.kind == kindTier && (m.tierID == "" || m.score <= 0 || m.score >= ceilingScore):
		return member{}, fmt.Errorf("%w: tier member with id %q score %d", ErrCorrupt, m.tierID, m.score)
	case m.kind == kindFloor && m.score != floorScore, m.kind == kindCeiling && m.score != ceilingScore:
		return member{}, fmt.Errorf("%w: sentinel member with score %d", ErrCorrupt, m.score)
	}
	return m, nil
}

// Gift lists: a msgpack array of [sku str, qty int, name str] arrays,
// one hash field per tier with gifts.

func encodeGifts(buf *bytes.Buffer, gifts []gradient.Gift) error {
	buf.Reset()
	enc := msgpack.NewEncoder(buf)
	if err := enc.EncodeArrayLen(len(gifts)); err != nil {
		return err
	}
	for _, g := range gifts {
		if err := enc.EncodeArrayLen(3); err != nil {
			return err
		}
		if err := enc.EncodeString(g.SKU); err != nil {
			return err
		}
		if err := enc.EncodeInt(int64(g.Qty)); err != nil {
			return err
		}
		if err := enc.EncodeString(g.Name); err != nil {
			return err
		}
	}
	return nil
}

// decodeGifts decodes a gift list with msgpack's Decoder under the
// guards msgpack v5.4.1 needs: the size is capped, Skip() walks the whole
// structure first (on the same bytes, through a separate reader) so a
// hostile length fails against the real input length before anything is
// allocated for it, counts are checked against gradient's limits before
// use, the input must be consumed whole, and a panic becomes ErrCorrupt.
func decodeGifts(b []byte, maxBytes int) (gifts []gradient.Gift, err error) {
	defer func() {
		if p := recover(); p != nil {
			gifts, err = nil, fmt.Errorf("%w: gift list decode panicked: %v", ErrCorrupt, p)
		}
	}()
	if len(b) > maxBytes {
		return nil, fmt.Errorf("%w: gift list of %d bytes (max %d)", ErrCorrupt, len(b), maxBytes)
	}
	src := bytes.NewReader(b)
	dec := msgpack.NewDecoder(src)
	if err := dec.Skip(); err != nil {
		return nil, fmt.Errorf("%w: gift list: %w", ErrCorrupt, err)
	}
	if src.Len() != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes after gift list", ErrCorrupt, src.Len())
	}
	src.Reset(b)
	dec.Reset(src)
	n, err := dec.DecodeArrayLen()
	if err != nil || n < 0 || n > gradient.MaxGiftsPerTier {
		return nil, fmt.Errorf("%w: gift list of %d entries: %v", ErrCorrupt, n, err)
	}
	gifts = make([]gradient.Gift, n)
	for i := range gifts {
		if k, err := dec.DecodeArrayLen(); err != nil || k != 3 {
			return nil, fmt.Errorf("%w: gift %d is not a 3-element array", ErrCorrupt, i)
		}
		g := &gifts[i]
		if g.SKU, err = dec.DecodeString(); err != nil {
			return nil, fmt.Errorf("%w: gift %d sku: %w", ErrCorrupt, i, err)
		}
		qty, err := dec.DecodeInt64()
		if err != nil || qty <= 0 || qty > gradient.MaxGiftQty {
			return nil, fmt.Errorf("%w: gift %d qty %d: %v", ErrCorrupt, i, qty, err)
		}
		g.Qty = int(qty)
		if g.Name, err = dec.DecodeString(); err != nil {
			return nil, fmt.Errorf("%w: gift %d name: %w", ErrCorrupt, i, err)
		}
	}
	if src.Len() != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes after gift list", ErrCorrupt, src.Len())
	}
	return gifts, nil
}

// encoded is one promotion ready to write: validated, hashed, encoded.
type encoded struct {
	id       string
	version  string
	promo    *gradient.Promotion
	members  []string // tier members, then floor, then ceiling
	scores   []int64
	gifts    []string // tier ID, gift list, tier ID, gift list, ...
	withGift int
}

// canonical writes the content that defines a promotion version: every
// field that changes what a read returns, in a fixed order, tiers sorted
// by score. Tier order in the input and decimal spellings (1.50 vs 1.5)
// do not change the hash.
func canonical(p *gradient.Promotion, order []int, scores []int64) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	put := func(errs ...error) error {
		for _, e := range errs {
			if e != nil {
				return e
			}
		}
		return nil
	}
	if err := put(
		enc.EncodeString("tierset.cache/v1"),
		enc.EncodeString(p.ID),
		enc.EncodeUint(uint64(p.Metric)),
		enc.EncodeUint(uint64(p.MinorDigits)),
		enc.EncodeUint(uint64(p.Kind)),
		enc.EncodeInt(windowMs(p.Start, openStart)),
		enc.EncodeInt(windowMs(p.End, openEnd)),
		enc.EncodeArrayLen(len(order)),
	); err != nil {
		return nil, err
	}
	for _, i := range order {
		t := &p.Tiers[i]
		if err := put(
			enc.EncodeArrayLen(8),
			enc.EncodeString(t.ID),
			enc.EncodeInt(scores[i]),
			enc.EncodeUint(uint64(t.Reward.Kind)),
			encodeDecimal(enc, t.Reward.Percent),
			encodeDecimal(enc, t.Reward.Amount),
			encodeDecimal(enc, t.Reward.Step),
			encodeDecimal(enc, t.Reward.Cap),
		); err != nil {
			return nil, err
		}
		var gb bytes.Buffer
		if err := encodeGifts(&gb, t.Gifts); err != nil {
			return nil, err
		}
		if _, err := buf.Write(gb.Bytes()); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// encodePromotion validates p (gradient rules plus the cache's own: the
// score 2^53 is reserved for the ceiling sentinel, records must fit
// MaxRecordBytes) and builds everything a refresh writes.
func encodePromotion(p *gradient.Promotion, maxBytes int) (*encoded, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	scores := make([]int64, len(p.Tiers))
	order := make([]int, len(p.Tiers))
	for i := range p.Tiers {
		s, _ := p.ScoreOf(&p.Tiers[i]) // Validate proved it encodes
		if s >= ceilingScore {
			return nil, &gradient.ValidationError{Promotion: p.ID, TierIndex: i, TierID: p.Tiers[i].ID, Field: "threshold",
				Err: gradient.ErrThreshold, Detail: fmt.Sprintf("score %d is ≥ 2^53 (reserved by the cache)", s)}
		}
		r := &p.Tiers[i].Reward
		for _, d := range []decimal.Decimal{r.Percent, r.Amount, r.Step, r.Cap} {
			if len(d.String()) > maxDecimalLen {
				return nil, &gradient.ValidationError{Promotion: p.ID, TierIndex: i, TierID: p.Tiers[i].ID, Field: "reward",
					Err: gradient.ErrBadReward, Detail: fmt.Sprintf("decimal %s is longer than %d characters", d.String(), maxDecimalLen)}
			}
		}
		scores[i] = s
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return scores[order[a]] < scores[order[b]] })
	canon, err := canonical(p, order, scores)
	if err != nil {
		return nil, fmt.Errorf("cache: encode promotion %q: %w", p.ID, err)
	}
	sum := sha256.Sum256(canon)
	e := &encoded{id: p.ID, version: hex.EncodeToString(sum[:8]), promo: p}
	base := member{
		version: e.version,
		metric:  p.Metric,
		digits:  p.MinorDigits,
		startMs: windowMs(p.Start, openStart),
		endMs:   windowMs(p.End, openEnd),
	}
	var buf bytes.Buffer
	add := func(m *member, s int64) error {
		if err := encodeMember(&buf, m); err != nil {
			return fmt.Errorf("cache: encode promotion %q: %w", p.ID, err)
		}
		if buf.Len() > maxBytes {
			return &gradient.ValidationError{Promotion: p.ID, TierIndex: -1, Field: "tiers", Err: gradient.ErrInvalid,
				Detail: fmt.Sprintf("member record of %d bytes exceeds MaxRecordBytes %d", buf.Len(), maxBytes)}
		}
		e.members = append(e.members, buf.String())
		e.scores = append(e.scores, s)
		return nil
	}
	for _, i := range order {
		t := &p.Tiers[i]
		m := base
		m.kind, m.tierID, m.score, m.hasGifts, m.reward = kindTier, t.ID, scores[i], len(t.Gifts) > 0, t.Reward
		if err := add(&m, scores[i]); err != nil {
			return nil, err
		}
		if len(t.Gifts) > 0 {
			if err := encodeGifts(&buf, t.Gifts); err != nil {
				return nil, fmt.Errorf("cache: encode promotion %q gifts: %w", p.ID, err)
			}
			if buf.Len() > maxBytes {
				return nil, &gradient.ValidationError{Promotion: p.ID, TierIndex: i, TierID: t.ID, Field: "gifts", Err: gradient.ErrBadGift,
					Detail: fmt.Sprintf("gift list of %d bytes exceeds MaxRecordBytes %d", buf.Len(), maxBytes)}
			}
			e.gifts = append(e.gifts, t.ID, buf.String())
			e.withGift++
		}
	}
	floor, ceiling := base, base
	floor.kind, floor.score = kindFloor, floorScore
	ceiling.kind, ceiling.score = kindCeiling, ceilingScore
	if err := add(&floor, floorScore); err != nil {
		return nil, err
	}
	if err := add(&ceiling, ceilingScore); err != nil {
		return nil, err
	}
	return e, nil
}

// Meta hash fields.
const (
	metaVersion = "version"
	metaPrev    = "prev"
	metaMetric  = "metric"
	metaDigits  = "digits"
	metaKind    = "kind"
	metaStart   = "start"
	metaEnd     = "end"
	metaTiers   = "tiers"
	metaGifts   = "gift_tiers"
	metaUpdated = "updated"
)

func (e *encoded) metaFields(prev string, now time.Time) []any {
	return []any{
		metaVersion, e.version,
		metaPrev, prev,
		metaMetric, strconv.Itoa(int(e.promo.Metric)),
		metaDigits, strconv.Itoa(e.promo.MinorDigits),
		metaKind, strconv.Itoa(int(e.promo.Kind)),
		metaStart, strconv.FormatInt(windowMs(e.promo.Start, openStart), 10),
		metaEnd, strconv.FormatInt(windowMs(e.promo.End, openEnd), 10),
		metaTiers, strconv.Itoa(len(e.promo.Tiers)),
		metaGifts, strconv.Itoa(e.withGift),
		metaUpdated, strconv.FormatInt(now.UnixMilli(), 10),
	}
}

// Version returns the content hash Refresh stores for p
// (RefreshResult.Version, Info.Version), after the same checks, for a
// Cache with the default Options.MaxRecordBytes: an error is exactly the
// one Refresh would refuse p with. It writes nothing and needs no Redis,
// so a dry run can tell Unchanged from Updated by comparing it with
// [Cache.Info]. The hash does not depend on the key prefix.
func Version(p *gradient.Promotion) (string, error) { return VersionFor(p, Options{}) }

// VersionFor is [Version] for a Cache built with opts; only
// opts.MaxRecordBytes changes what is refused, never the hash. Bad opts are
// ErrBadOptions.
func VersionFor(p *gradient.Promotion, opts Options) (string, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return "", err
	}
	e, err := encodePromotion(p, o.MaxRecordBytes)
	if err != nil {
		return "", err
	}
	return e.version, nil
}
