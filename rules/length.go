package rules

import (
	"github.com/tierset/tierset/internal/text"
	"github.com/tierset/tierset/score"
)

// MaxStringLen bounds one JSON string of a rules file (IDs, names, notes,
// amounts written as strings), in bytes: far beyond any real value.
const MaxStringLen = 4096

// checkLengths is one pass over the raw bytes, before any JSON decoding,
// that refuses a string longer than MaxStringLen or a bare token (a JSON
// number) longer than MaxNumberLen. Why first: every later pass is linear
// in such a value (BenchmarkParseRefusesLongNumber, docs/benchmarks.md);
// this loop refuses it in one cheap pass. Syntax is checked
// later, so it only tracks string boundaries and escapes.
func (p *parser) checkLengths(data []byte) bool {
	for i := 0; i < len(data); {
		c := data[i]
		switch {
		case c == '"':
			j := i + 1
			for j < len(data) && data[j] != '"' {
				if data[j] == '\\' {
					j++
				}
				j++
			}
			if n := j - i - 1; n > MaxStringLen {
				p.tooLong(data, i, n, "a string", MaxStringLen)
				return false
			}
			i = j + 1
		case c == '-' || c >= '0' && c <= '9':
			j := i
			for j < len(data) && !isDelim(data[j]) {
				j++
			}
			if n := j - i; n > MaxNumberLen {
				p.tooLong(data, i, n, "a number", MaxNumberLen)
				return false
			}
			i = j
		default:
			i++
		}
	}
	return true
}

func isDelim(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', ']', '}', ':':
		return true
	}
	return false
}

// tooLong reports the value at off, quoting only its first bytes.
func (p *parser) tooLong(data []byte, off, n int, what string, limit int) {
	head := string(data[off:min(off+41, len(data))])
	e := fileAt.err("", score.ErrTooLong, "%s of %d bytes is longer than the %d a rules file allows: %s…",
		what, n, limit, text.Escape(head))
	e.Line, e.Column = lineCol(data, int64(off))
	p.add(e)
}
