package rules

import (
	"errors"
	"strconv"
	"strings"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/text"
)

// Sentinel errors. Every *Error wraps one of these (or a gradient/score
// sentinel, for failures gradient's validation found), and every *Error
// also matches ErrInvalid.
var (
	// ErrInvalid matches every error about the content of a rules file.
	ErrInvalid = errors.New("rules: invalid rules file")
	// ErrTooLarge: the input is larger than Options.MaxBytes.
	ErrTooLarge = errors.New("rules: input too large")
	// ErrSyntax: the input is not well-formed JSON.
	ErrSyntax = errors.New("rules: JSON syntax error")
	// ErrUnknownField: an object carries a field the format does not define.
	ErrUnknownField = errors.New("rules: unknown field")
	// ErrType: a field holds the wrong JSON type.
	ErrType = errors.New("rules: wrong JSON type")
	// ErrMissing: a required field is absent.
	ErrMissing = errors.New("rules: required field missing")
	// ErrVersion: the file's version is not one this package reads.
	ErrVersion = errors.New("rules: unsupported version")
	// ErrNumber: a number that is not a plain decimal (exponent forms,
	// more than MaxNumberLen characters, booleans, objects).
	ErrNumber = errors.New("rules: malformed number")
	// ErrTime: a window bound that is not an RFC 3339 time.
	ErrTime = errors.New("rules: malformed time")
	// ErrEnum: a metric, rule kind or reward kind the format does not define.
	ErrEnum = errors.New("rules: unknown name")
	// ErrDuplicatePromotion: two promotions of one file share an ID.
	ErrDuplicatePromotion = errors.New("rules: duplicate promotion id")
	// ErrEmpty: a file without promotions.
	ErrEmpty = errors.New("rules: no promotions")
	// ErrDuplicateKey: an object gives one key twice (compared the way
	// encoding/json matches keys: case-insensitively).
	ErrDuplicateKey = errors.New("rules: duplicate key")
	// ErrEncoding: bytes that are not UTF-8, or a \u escape that is a lone
	// surrogate.
	ErrEncoding = errors.New("rules: not valid UTF-8")
)

// Error is one problem in a rules file. It names the file, and where it
// can, the promotion, the tier and the field. It wraps the sentinel that
// classifies it (errors.Is works), which for checks done by
// gradient.Promotion.Validate is the *gradient.ValidationError itself, so
// errors.As reaches it and errors.Is reaches gradient's sentinels.
type Error struct {
	// File is the name given to Parse (the path for ParseFile).
	File string
	// Line and Column (1-based) locate JSON syntax errors; 0 otherwise.
	Line, Column int
	// PromotionIndex is the promotion's position in the file's
	// "promotions" array (0-based), -1 when the error is about the file.
	PromotionIndex int
	// Promotion is the promotion's ID, "" when it has none (yet).
	Promotion string
	// TierIndex is the tier's position in the promotion's "tiers" array
	// (0-based, like gradient.ValidationError, whose messages count tiers
	// the same way), -1 when the error is about the promotion.
	TierIndex int
	// TierID is the tier's ID, "" when unknown.
	TierID string
	// Field is the JSON field at fault, dotted from the promotion or tier
	// ("threshold", "reward.amount", "gifts[0].qty"), "" when none.
	Field string
	// Detail is the human-readable rest of the message, starting with the
	// field when there is one.
	Detail string
	// Err is the wrapped cause.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line) + ":" + strconv.Itoa(e.Column))
	}
	if e.PromotionIndex >= 0 {
		if e.Promotion != "" {
			b.WriteString(": promotion " + quoteID(e.Promotion))
		} else {
			b.WriteString(": promotions[" + strconv.Itoa(e.PromotionIndex) + "]")
		}
		if e.TierIndex >= 0 {
			b.WriteString(" tier " + strconv.Itoa(e.TierIndex))
			if e.TierID != "" {
				b.WriteString(" (id " + quoteID(e.TierID) + ")")
			}
		}
	}
	b.WriteString(": " + e.Detail)
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// quoteID quotes an ID whole when it is of a valid length, else a prefix
// (an oversized ID is itself the error, and may be megabytes).
func quoteID(id string) string {
	if len(id) <= gradient.MaxIDLen {
		return strconv.Quote(id)
	}
	return text.Quote(id)
}

// Is makes every *Error match ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }
