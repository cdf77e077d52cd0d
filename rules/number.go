package rules

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/internal/text"
	"github.com/tierset/tierset/score"
)

// shortRaw shows at most a prefix of a raw JSON value in a message.
func shortRaw(raw []byte) string {
	const max = 40
	if len(raw) <= max {
		return string(raw)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(raw[cut]) {
		cut--
	}
	return string(raw[:cut]) + "… (" + strconv.Itoa(len(raw)) + " bytes)"
}

func present(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && !bytes.Equal(t, []byte("null"))
}

// number parses a decimal given as a JSON string ("99.99") or a JSON
// number (99.99) straight from its text, never through float64. Only the
// plain notation -?digits[.digits] is accepted: exponent forms such as
// 1e400 are how float64 output looks, and would hide a lost digit.
func (p *parser) number(a at, field string, raw json.RawMessage, required bool) (decimal.Decimal, bool) {
	t := bytes.TrimSpace(raw)
	if !present(t) {
		if required {
			p.add(a.err(field, ErrMissing, "%s is required", field))
		}
		return decimal.Decimal{}, false
	}
	var s string
	switch {
	case t[0] == '"':
		if err := json.Unmarshal(t, &s); err != nil {
			p.add(a.err(field, ErrNumber, "%s: not a JSON string", field))
			return decimal.Decimal{}, false
		}
	case t[0] == '-' || (t[0] >= '0' && t[0] <= '9'):
		s = string(t)
	default:
		p.add(a.err(field, ErrNumber, "%s %s must be a decimal string or number", field, shortRaw(t)))
		return decimal.Decimal{}, false
	}
	if !plainDecimal(s) {
		sentinel := ErrNumber
		if len(s) > MaxNumberLen {
			sentinel = fmt.Errorf("%w: %w", ErrNumber, score.ErrTooLong)
		}
		p.add(a.err(field, sentinel, "%s %s is not a plain decimal of at most %d characters (write digits, e.g. \"99.99\"; exponents are refused)", field, text.Quote(s), MaxNumberLen))
		return decimal.Decimal{}, false
	}
	d, err := decimal.NewFromString(s)
	if err != nil {
		p.add(a.err(field, fmt.Errorf("%w: %w", ErrNumber, err), "%s %q: %v", field, s, err))
		return decimal.Decimal{}, false
	}
	return d, true
}

func plainDecimal(s string) bool {
	if len(s) == 0 || len(s) > MaxNumberLen {
		return false
	}
	i := 0
	if s[0] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if digits() == 0 {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}

// fracDigits counts the fractional digits a value needs (99.990 needs 2).
func fracDigits(d decimal.Decimal) int {
	s := d.String()
	dot := strings.IndexByte(s, '.')
	if dot < 0 {
		return 0
	}
	return len(strings.TrimRight(s[dot+1:], "0"))
}
