package cache

import (
	"bytes"
	"fmt"
	"math"
	"strings"
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
//	1 tier ID   str   "" for sentinels, but padding ("-" repeated) on the
//	                  ceiling of a ladder of more than skiplistAbove
//	                  tiers (version.go); a sentinel's is never read
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
//	14 owner    uint  ownerTag of the promotion ID: a member read under
//	                  another promotion's key is refused as ErrCorrupt
//
// The floor sentinel sits at score -1 and the ceiling at 2^53, so every
// ZRANGE on an existing promotion returns a versioned member: the floor
// when no tier is reached, the ceiling when there is no next tier.
const (
	memberFields = 15
	// legacyFields is the member layout before the owner tag. Such a
	// member is still read, without the owner check, so readers can be
	// upgraded before the cache is re-warmed; its promotion's version was
	// hashed under the old format tag, so the next Refresh sees a
	// different version and rewrites it (Updated, never Unchanged).
	legacyFields = 14

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
	owner    uint32
	hasOwner bool // false for a member in the legacy layout
}

// ownerTag is the 32-bit FNV-1a hash of a promotion ID that every member
// carries. It guards against misplaced records (a copy, a rename, a tool
// bug), not against a forger: 32 bits keep a member 5 bytes longer.
func ownerTag(id string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		h ^= uint32(id[i])
		h *= 16777619
	}
	return h
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
		func() error { return enc.EncodeUint32(m.owner) },
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
	n := r.arrayLen()
	if n != memberFields && n != legacyFields {
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
	if n == memberFields {
		m.owner, m.hasOwner = uint32(r.small(math.MaxUint32)), true
	}
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
func decodeGifts(s string, maxBytes int) ([]gradient.Gift, error) {
	var gd giftDecoder
	return gd.decode(s, maxBytes)
}

// giftDecoder is decodeGifts for many lists: one reader and one msgpack
// Decoder, reset for each, read the reply's string without a copy to
// bytes. The lists it returns are new each time; the decoder keeps no
// part of them.
type giftDecoder struct {
	src strings.Reader
	dec *msgpack.Decoder
}

// decode is decodeGifts on s.
func (gd *giftDecoder) decode(s string, maxBytes int) (gifts []gradient.Gift, err error) {
	defer func() {
		if p := recover(); p != nil {
			gifts, err = nil, fmt.Errorf("%w: gift list decode panicked: %v", ErrCorrupt, p)
		}
	}()
	if len(s) > maxBytes {
		return nil, fmt.Errorf("%w: gift list of %d bytes (max %d)", ErrCorrupt, len(s), maxBytes)
	}
	src := &gd.src
	src.Reset(s)
	if gd.dec == nil {
		gd.dec = msgpack.NewDecoder(src)
	} else {
		gd.dec.Reset(src)
	}
	dec := gd.dec
	if err := dec.Skip(); err != nil {
		return nil, fmt.Errorf("%w: gift list: %w", ErrCorrupt, err)
	}
	if src.Len() != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes after gift list", ErrCorrupt, src.Len())
	}
	src.Reset(s)
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
