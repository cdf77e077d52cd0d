// Package rules reads the JSON rules file a warm-up job loads into the tier
// cache, and turns it into validated [gradient.Promotion] values.
//
// Use it to load a file, then hand the promotions to package warm:
//
//	promos, err := rules.ParseFile("rules.json", rules.Options{})
//	if err != nil {
//		return err // every problem, each naming file, promotion, tier and field
//	}
//	report, err := warm.Warm(ctx, c, promos, warm.Options{})
//
// [Parse] reads from an io.Reader, [ParseFile] from a path. A file with any
// problem yields no promotions at all, so a warm-up never loads half a
// file. Problems come back as [*Error] values (several joined with
// errors.Join) that match [ErrInvalid] and name the place:
//
//	rules.json: promotion "10086" tier 2 (id "t3"): threshold "99.999" has 3 fractional digits, currency allows 2
//	rules.json:7:18: JSON syntax error: invalid character '}' looking for beginning of object key string
//
// Tiers and promotions are counted from 0, as in gradient's messages; a
// promotion without an id is named by its position, "promotions[4]". Each
// *Error wraps a sentinel of this package ([ErrSyntax], [ErrUnknownField],
// …) or the [*gradient.ValidationError] itself, so errors.Is reaches
// gradient's and score's sentinels.
//
// Both refuse an input larger than [Options].MaxBytes (32 MiB by default),
// unknown fields, an object key given twice at any level (compared
// case-insensitively, as encoding/json matches keys: [ErrDuplicateKey]),
// bytes that are not UTF-8 or lone-surrogate \u escapes ([ErrEncoding]),
// a number longer than [MaxNumberLen] or a string longer than
// [MaxStringLen] (score.ErrTooLong, before any decoding), and duplicate
// promotion IDs. Every amount is parsed exactly with shopspring/decimal,
// never through float64, and every promotion passes
// [gradient.Promotion.Validate].
//
// # Format (version 1)
//
// The top level is an object with exactly two fields:
//
//	version     required, the integer 1
//	promotions  required, non-empty array of promotions
//
// A promotion:
//
//	id            required string, unique in the file; at most 128 bytes, no
//	              braces, whitespace or control characters
//	note          optional free text for humans; ignored, not stored
//	metric        required: "quantity" (thresholds count items) or
//	              "amount" (thresholds are money)
//	minor_digits  optional integer: the currency's minor-unit digits, as
//	              gradient.Promotion.MinorDigits reads them. Absent means
//	              2 (CNY/USD/EUR), -1 none (JPY), 1..9 that many (3 for
//	              KWD); 0 is refused (the first format used it for none).
//	              Money amounts must be exact to it, and discounts are
//	              rounded to it.
//	kind          optional: "threshold" (default), "parity_price" or
//	              "parity_discount" (奇偶定价 / 奇偶打折: tiers match on
//	              match_value instead of threshold)
//	start, end    optional RFC 3339 times bounding [start, end); an
//	              absent bound is open. end must be after start.
//	revision      optional integer ≥ 0, default 0: the promotion's
//	              revision (gradient.Promotion.Revision). Raise it with
//	              every change, and the cache refuses to let an older
//	              copy replace a newer one (a second warm-up from an old
//	              file writes nothing for it, reported stale). 0 is
//	              unordered: the file's copy replaces an unordered one,
//	              last writer wins, never a copy stored with a revision
//	              or one deleted at a revision (reported stale).
//	tiers         required non-empty array of tiers (at most 10000)
//
// A tier:
//
//	id           required string, unique in the promotion
//	threshold    the minimum metric value that hits the tier (kind
//	             "threshold"): a whole count for "quantity", a money
//	             amount with at most minor_digits fractional digits for
//	             "amount". Must be > 0 and unique in the promotion.
//	match_value  the same, for the parity kinds (and only for them)
//	reward       required object, see below
//	gifts        optional array of {"sku": string, "qty": 1..1000,
//	             "name": optional string}, at most 100
//
// A reward names its kind and exactly the fields that kind uses, plus an
// optional "cap" bounding the discount; any other field is refused, so a
// misspelt kind cannot silently drop an amount:
//
//	{"kind": "percent_off", "percent": "10"}               10% off, percent in (0, 100]
//	{"kind": "amount_off",  "amount": "10"}                10 off
//	{"kind": "fixed_price", "amount": "30.00"}             the line costs 30.00
//	{"kind": "every_n", "step": "100", "amount": "10"}     每满减: 10 off per full 100
//
// Numbers (thresholds, amounts, percents, steps, caps) are written either
// as JSON strings ("99.99") or as JSON numbers (99.99); both are read from
// their text, exactly. Only plain notation is accepted: -?digits[.digits].
// Exponent forms such as 1e400 are refused, because they are what float64
// output looks like and would hide a digit already lost. Trailing zeros
// are fine: "199.990" is exact to 2 digits.
//
// # Example
//
//	{"version": 1, "promotions": [{
//	  "id": "10086", "note": "spend 99.99 get 10 off plus a tote bag",
//	  "metric": "amount",
//	  "start": "2026-12-01T00:00:00+08:00", "end": "2027-01-01T00:00:00+08:00",
//	  "tiers": [
//	    {"id": "t1", "threshold": "99.99", "reward": {"kind": "amount_off", "amount": "10"},
//	     "gifts": [{"sku": "TOTE-01", "qty": 1, "name": "Canvas tote bag"}]},
//	    {"id": "t2", "threshold": 199.99, "reward": {"kind": "percent_off", "percent": "15", "cap": "40"}}
//	  ]}]}
//
// The repository's examples/rules.json is a fuller sample (quantity, every
// n, fixed price, parity and JPY promotions).
package rules
