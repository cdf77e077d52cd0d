package rules

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tierset/tierset/internal/text"
)

// checkShape walks the raw bytes of a well-formed JSON document and
// reports what encoding/json would silently accept: an object key given
// twice (json keeps the last, and matches keys case-insensitively, so
// "id" and "ID" are the same key to it), bytes that are not UTF-8 and
// \u escapes that are lone surrogates (json turns both into U+FFFD). A
// file with either says something other than what it will be read as,
// so it is refused whole. It returns false when it reported anything.
func (p *parser) checkShape(data []byte) bool {
	w := &shapeWalker{p: p, data: data}
	w.value()
	return !w.bad
}

// shapeWalker is a recursive descent over JSON already known to be well
// formed (encoding/json checked it, nesting included), so it never has to
// handle a syntax error.
type shapeWalker struct {
	p    *parser
	data []byte
	i    int
	// path is where the walk is: object keys and array indexes.
	path []pathElem
	bad  bool
}

type pathElem struct {
	key   string
	index int // -1 for a key
}

func (w *shapeWalker) ws() {
	for w.i < len(w.data) {
		switch w.data[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

func (w *shapeWalker) value() {
	w.ws()
	switch w.data[w.i] {
	case '{':
		w.object()
	case '[':
		w.array()
	case '"':
		w.str()
	default: // number, true, false, null
		for w.i < len(w.data) && !strings.ContainsRune(" \t\n\r,]}", rune(w.data[w.i])) {
			w.i++
		}
	}
}

func (w *shapeWalker) object() {
	w.i++                     // {
	first := map[string]int{} // folded key -> offset of its first occurrence
	for {
		w.ws()
		switch w.data[w.i] {
		case '}':
			w.i++
			return
		case ',':
			w.i++
			w.ws()
		}
		at := w.i
		key := w.str()
		folded := foldKey(key)
		w.path = append(w.path, pathElem{key: key, index: -1})
		if prev, dup := first[folded]; dup {
			w.duplicate(key, at, prev)
		} else {
			first[folded] = at
		}
		w.ws()
		w.i++ // :
		w.value()
		w.path = w.path[:len(w.path)-1]
	}
}

func (w *shapeWalker) array() {
	w.i++ // [
	for n := 0; ; n++ {
		w.ws()
		switch w.data[w.i] {
		case ']':
			w.i++
			return
		case ',':
			w.i++
		}
		w.path = append(w.path, pathElem{index: n})
		w.value()
		w.path = w.path[:len(w.path)-1]
	}
}

// str checks one string (at its opening quote) and returns its decoded
// text; only keys use it, so values are decoded for nothing but the check.
func (w *shapeWalker) str() string {
	start := w.i
	w.i++ // "
	plain, reported := true, false
	for {
		c := w.data[w.i]
		switch {
		case c == '"':
			w.i++
			raw := w.data[start:w.i]
			if plain {
				return string(raw[1 : len(raw)-1])
			}
			var s string
			_ = json.Unmarshal(raw, &s) // well formed: cannot fail
			return s
		case c == '\\':
			plain = false
			if w.data[w.i+1] == 'u' {
				w.escape()
				continue
			}
			w.i += 2
		case c < utf8.RuneSelf:
			w.i++
		default:
			r, size := utf8.DecodeRune(w.data[w.i:])
			if r == utf8.RuneError && size == 1 && !reported {
				w.report(w.i, ErrEncoding, "byte 0x%02x in a string at %s is not UTF-8 (save the file as UTF-8)", w.data[w.i], w.where())
				w.bad, reported = true, true
			}
			w.i += size
		}
	}
}

// escape checks a \uXXXX escape at w.i: a surrogate must be a high one
// followed by a low one.
func (w *shapeWalker) escape() {
	at := w.i
	r := hex4(w.data[w.i+2 : w.i+6])
	w.i += 6
	if !utf16IsSurrogate(r) {
		return
	}
	if r < 0xdc00 && w.i+6 <= len(w.data) && w.data[w.i] == '\\' && w.data[w.i+1] == 'u' {
		if lo := hex4(w.data[w.i+2 : w.i+6]); lo >= 0xdc00 && lo <= 0xdfff {
			w.i += 6
			return
		}
	}
	w.report(at, ErrEncoding, "the escaped code point %U at %s is a lone UTF-16 surrogate, not a character", r, w.where())
	w.bad = true
}

func utf16IsSurrogate(r rune) bool { return r >= 0xd800 && r <= 0xdfff }

func hex4(b []byte) rune {
	n, _ := strconv.ParseUint(string(b), 16, 16) // well formed: four hex digits
	return rune(n)
}

func (w *shapeWalker) duplicate(key string, at, prev int) {
	pl, pc := lineCol(w.data, int64(prev))
	w.report(at, ErrDuplicateKey, "duplicate key %s at %s (first given at line %d, column %d): a file must say each thing once",
		text.Quote(key), w.where(), pl, pc)
	w.bad = true
}

func (w *shapeWalker) report(off int, sentinel error, format string, args ...any) {
	field := ""
	if len(w.path) > 0 {
		field = w.where()
	}
	e := fileAt.err(field, sentinel, format, args...)
	e.Line, e.Column = lineCol(w.data, int64(off))
	w.p.add(e)
}

// where renders the path as the file's field names: promotions[0].tiers[1].reward.amount.
func (w *shapeWalker) where() string {
	if len(w.path) == 0 {
		return "the top level"
	}
	var b strings.Builder
	for _, e := range w.path {
		switch {
		case e.index >= 0:
			b.WriteString("[" + strconv.Itoa(e.index) + "]")
		case simpleKey(e.key):
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(e.key)
		default:
			b.WriteString("[" + text.Quote(e.key) + "]")
		}
	}
	return b.String()
}

func simpleKey(k string) bool {
	if k == "" || len(k) > 64 {
		return false
	}
	for _, r := range k {
		if r != '_' && (r > unicode.MaxASCII || !unicode.IsLetter(r) && !unicode.IsDigit(r)) {
			return false
		}
	}
	return true
}

// foldKey folds a key the way encoding/json matches field names (its
// foldName: ASCII upper case, other runes to the smallest of their
// simple-fold orbit), so keys json would treat as one compare equal.
func foldKey(k string) string {
	return strings.Map(func(r rune) rune {
		if r < utf8.RuneSelf {
			return unicode.ToUpper(r)
		}
		for {
			r2 := unicode.SimpleFold(r)
			if r2 <= r {
				return r2
			}
			r = r2
		}
	}, k)
}
