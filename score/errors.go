package score

import "errors"

// Sentinel errors. Every error returned by this package wraps one of these,
// so callers branch with errors.Is.
var (
	// ErrOutOfRange: the score would leave the range where float64 holds
	// every integer exactly (|s| ≤ 2^53), or a time lies past the codec's MaxTime.
	ErrOutOfRange = errors.New("score: value outside the exact range |s| ≤ 2^53")
	// ErrNegative: a count, amount or threshold below zero.
	ErrNegative = errors.New("score: negative value")
	// ErrTooPrecise: an amount carries more fractional digits than the
	// currency's minor unit allows. It is refused, never rounded.
	ErrTooPrecise = errors.New("score: amount has more fractional digits than the currency allows")
	// ErrMinorDigits: the number of minor digits is outside [0, MaxMinorDigits].
	ErrMinorDigits = errors.New("score: minor digits out of range")
	// ErrNotInteger: a score read back from Redis is not an exact integer.
	ErrNotInteger = errors.New("score: not an exact integer")
	// ErrMalformed: a score or amount string that does not parse.
	ErrMalformed = errors.New("score: malformed number")
	// ErrTooLong: a number refused for its size before any parsing or
	// arithmetic: a string longer than MaxNumberLen, or a decimal with
	// more than MaxDigits significant digits.
	ErrTooLong = errors.New("score: number too long")
	// ErrBeforeEpoch: a time earlier than the time codec's epoch.
	ErrBeforeEpoch = errors.New("score: time before the codec epoch")
	// ErrSeqRange: a sequence number outside [0, 2^bits).
	ErrSeqRange = errors.New("score: sequence outside [0, 2^bits)")
	// ErrBits: a time codec bit count outside [0, MaxSeqBits].
	ErrBits = errors.New("score: sequence bits out of range")
)
