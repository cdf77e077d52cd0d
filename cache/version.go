package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/tierset/tierset/gradient"
)

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

// formatTag starts every canonical encoding. Changing the member or key
// format changes it, so every version changes and the next Refresh
// rewrites promotions stored in the old format instead of calling them
// Unchanged. v2: members carry their promotion's owner tag. The ceiling's
// padding (skiplistAbove) left it alone on purpose: a padded and an
// unpadded ceiling read the same, so a stored unpadded ladder is still
// right and need not be rewritten.
const formatTag = "tierset.cache/v2"

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
		enc.EncodeString(formatTag),
		enc.EncodeString(p.ID),
		enc.EncodeUint(uint64(p.Metric)),
		enc.EncodeUint(uint64(gradient.Digits(p.MinorDigits))),
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

// A tiers ZSET of at most zset-max-listpack-entries (128) members, none
// longer than zset-max-listpack-value (64 B), is a listpack, where a
// reverse BYSCORE range walks from the tail entry by entry; as a skiplist
// the same ZRANGE costs the server the same at every ladder size, less
// than a listpack's at every size, at 2.5-4.4x the memory (docs/design.md,
// "Skiplist ladders"). The cache cannot choose a key's encoding, but one
// member longer than 64 B makes Redis convert the ZSET, so the ceiling
// sentinel of a ladder with more than skiplistAbove tiers carries padding
// in its otherwise empty tier ID field, up to listpackMaxValue+1 bytes.
// The padding is not part of the version (canonical does not see it): a
// ladder written unpadded by an older version reads the same and is
// Unchanged by a Refresh of the same content. Readers accept any tier ID
// on a sentinel, as older readers did.
const (
	skiplistAbove = 16
	// listpackMaxValue is Redis's default zset-max-listpack-value. A
	// server configured higher keeps padded ladders as listpacks: still
	// correct, only slower.
	listpackMaxValue = 64
	ceilingPad       = "-"
)

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
		owner:   ownerTag(p.ID),
		version: e.version,
		metric:  p.Metric,
		digits:  gradient.Digits(p.MinorDigits),
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
	if len(p.Tiers) > skiplistAbove {
		if err := encodeMember(&buf, &ceiling); err != nil {
			return nil, fmt.Errorf("cache: encode promotion %q: %w", p.ID, err)
		}
		if n := listpackMaxValue + 1 - buf.Len(); n > 0 && listpackMaxValue+1 <= maxBytes {
			ceiling.tierID = strings.Repeat(ceilingPad, n)
		}
	}
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
	metaRev     = "rev"
)

// metaFieldCount is the number of fields metaFields writes.
const metaFieldCount = 11

func (e *encoded) metaFields(prev string, now time.Time) []any {
	return []any{
		metaVersion, e.version,
		metaPrev, prev,
		metaMetric, strconv.Itoa(int(e.promo.Metric)),
		metaDigits, strconv.Itoa(gradient.Digits(e.promo.MinorDigits)),
		metaKind, strconv.Itoa(int(e.promo.Kind)),
		metaStart, strconv.FormatInt(windowMs(e.promo.Start, openStart), 10),
		metaEnd, strconv.FormatInt(windowMs(e.promo.End, openEnd), 10),
		metaTiers, strconv.Itoa(len(e.promo.Tiers)),
		metaGifts, strconv.Itoa(e.withGift),
		metaUpdated, strconv.FormatInt(now.UnixMilli(), 10),
		metaRev, strconv.FormatInt(e.promo.Revision, 10),
	}
}

// Version returns the content hash Refresh stores for p
// (RefreshResult.Version, Info.Version), after the same checks, for a
// Cache built with opts (zero Options: the defaults): an error is exactly
// the one Refresh would refuse p with. Only opts.MaxRecordBytes changes
// what is refused, never the hash, and the hash does not depend on the key
// prefix. Bad opts are ErrInvalid. It writes nothing and needs no
// Redis, so a dry run can tell Unchanged from Updated by comparing it
// with [Cache.Info].
func Version(p *gradient.Promotion, opts Options) (string, error) {
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
