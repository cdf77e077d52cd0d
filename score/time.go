package score

import (
	"fmt"
	"time"
)

// DefaultSeqBits is the default number of sequence bits: 1024 tasks per
// millisecond keep their order, and scores stay exact until the year 2248.
const DefaultSeqBits = 10

// MaxSeqBits caps the sequence bits. Each extra bit halves the time span:
// 20 bits leave 2^33 ms (about 99 days) past the epoch, so more is useless.
const MaxSeqBits = 20

// TimeCodec encodes (milliseconds since Epoch, seq) as one exact score:
// ms<<Bits | seq. Scores sort by time first and by seq within a
// millisecond, so same-ms tasks keep their enqueue order.
// The zero value is the default codec: the Unix epoch and 10 bits.
type TimeCodec struct {
	epochMs int64
	bits    uint
	set     bool
}

// NewTimeCodec returns a codec with the given epoch and sequence bits.
func NewTimeCodec(epoch time.Time, bits uint) (TimeCodec, error) {
	if bits > MaxSeqBits {
		return TimeCodec{}, fmt.Errorf("%w: %d (allowed 0..%d)", ErrBits, bits, MaxSeqBits)
	}
	return TimeCodec{epochMs: epoch.UnixMilli(), bits: bits, set: true}, nil
}

// DefaultTimeCodec is the Unix epoch with DefaultSeqBits.
func DefaultTimeCodec() TimeCodec { return TimeCodec{} }

// Bits returns the number of sequence bits.
func (c TimeCodec) Bits() uint {
	if !c.set {
		return DefaultSeqBits
	}
	return c.bits
}

// Epoch returns the codec's epoch.
func (c TimeCodec) Epoch() time.Time { return time.UnixMilli(c.epochMs) }

// EpochMs returns the codec's epoch in Unix milliseconds.
func (c TimeCodec) EpochMs() int64 { return c.epochMs }

// MaxSeq is the largest sequence number: 2^bits - 1.
func (c TimeCodec) MaxSeq() int64 { return 1<<c.Bits() - 1 }

// MaxMs is the largest millisecond offset from the epoch whose every
// sequence number still encodes to a score ≤ 2^53.
func (c TimeCodec) MaxMs() int64 { return (MaxExact - c.MaxSeq()) >> c.Bits() }

// MaxTime is the last instant the codec can encode exactly.
func (c TimeCodec) MaxTime() time.Time { return time.UnixMilli(c.epochMs + c.MaxMs()) }

// Encode encodes a Unix-millisecond instant and a sequence number.
func (c TimeCodec) Encode(unixMs int64, seq int64) (int64, error) {
	rel, err := c.rel(unixMs)
	if err != nil {
		return 0, err
	}
	if seq < 0 || seq > c.MaxSeq() {
		return 0, fmt.Errorf("%w: %d (max %d)", ErrSeqRange, seq, c.MaxSeq())
	}
	return Check(rel<<c.Bits() | seq)
}

// EncodeTime is Encode for a time.Time (truncated to the millisecond).
func (c TimeCodec) EncodeTime(t time.Time, seq int64) (int64, error) {
	return c.Encode(t.UnixMilli(), seq)
}

// Decode splits a score into its Unix-millisecond instant and sequence.
func (c TimeCodec) Decode(s int64) (unixMs int64, seq int64, err error) {
	if _, err := Check(s); err != nil {
		return 0, 0, err
	}
	if s < 0 {
		return 0, 0, fmt.Errorf("%w: score %d", ErrBeforeEpoch, s)
	}
	return c.epochMs + s>>c.Bits(), s & c.MaxSeq(), nil
}

// DecodeTime is Decode returning a time.Time.
func (c TimeCodec) DecodeTime(s int64) (time.Time, int64, error) {
	ms, seq, err := c.Decode(s)
	if err != nil {
		return time.Time{}, 0, err
	}
	return time.UnixMilli(ms), seq, nil
}

// DueBound is the inclusive upper score bound for "everything due at or
// before unixMs": unixMs<<bits | (2^bits - 1).
func (c TimeCodec) DueBound(unixMs int64) (int64, error) {
	return c.Encode(unixMs, c.MaxSeq())
}

func (c TimeCodec) rel(unixMs int64) (int64, error) {
	if unixMs < c.epochMs {
		return 0, fmt.Errorf("%w: %d ms < epoch %d ms", ErrBeforeEpoch, unixMs, c.epochMs)
	}
	rel := unixMs - c.epochMs
	if rel > c.MaxMs() {
		return 0, fmt.Errorf("%w: %s is after the codec's max time %s", ErrOutOfRange,
			time.UnixMilli(unixMs).UTC().Format(time.RFC3339), c.MaxTime().UTC().Format(time.RFC3339))
	}
	return rel, nil
}
