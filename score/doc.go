// Package score turns numbers into exact Redis sorted-set scores and back.
//
//	s, err := score.Amount(decimal.RequireFromString("99.99"), 2) // 9999
//	v := score.MinorToAmount(s, 2)                                 // 99.99
//
// Digit counts here are the count itself: 0 is a currency without minor
// units. gradient.Digits turns a MinorDigits value of the other packages
// (where 0 means the default, 2) into this count.
//
// Redis stores scores as IEEE-754 doubles, which hold every integer exactly
// only up to 2^53. This package is the one place that knows that rule:
// every encoder funnels through [Check], which refuses |s| > [MaxExact]
// with [ErrOutOfRange], and every score read back goes through [Parse],
// which refuses anything that is not an exact integer.
//
// Thresholds:
//   - [Count] encodes an item count.
//   - [Amount] encodes a money amount as integer minor units (cents for 2
//     minor digits, yen for 0, fils for 3). It never rounds: an amount with
//     more fractional digits than the currency allows is refused with
//     [ErrTooPrecise]. No float64 ever touches money.
//   - [AmountFloor] is the query-side helper: it floors a cart amount to
//     minor units, which is exact for "largest threshold ≤ value".
//
// Bounded input: every parser and encoder refuses an over-long number
// before reading it, with [ErrTooLong]: a string longer than
// [MaxNumberLen] ([ParseDecimal], [ParseAmount], [ParseString]) or a
// decimal of more than [MaxDigits] significant digits ([CheckDecimal],
// called first by [Amount] and [AmountFloor]); a value far beyond 2^53,
// such as 1e999999999, is refused by its size, never expanded. Errors
// quote at most a short prefix of the input.
//
// Time: [TimeCodec] encodes (ms since epoch) << bits | seq for the delay
// queue. Its zero value is the Unix epoch with 10 bits: 1024 tasks per
// millisecond keep their order, and scores stay exact until 2248
// ([TimeCodec.MaxTime]). [TimeCodec.DueBound] is the inclusive bound for
// "everything due at or before ms".
//
// Bounds: [Inclusive], [Exclusive], [NegInf] and [PosInf] format ZRANGE
// BYSCORE bounds. The codec never emits NaN (real Redis rejects it) or hex
// (real Redis accepts "0x10", miniredis does not).
package score
