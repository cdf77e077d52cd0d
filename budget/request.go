package budget

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Line asks for one promotion in a reservation.
type Line struct {
	Promotion string `json:"p"`
	// Uses is how many times the promotion applies: 1..MaxAmount.
	Uses int64 `json:"u"`
	// Amount is the discount given, in integer minor units (cents): 0..
	// MaxAmount. score.Amount turns a decimal into minor units exactly.
	Amount int64 `json:"a,omitempty"`
}

// Request is a reservation to make.
type Request struct {
	// Order identifies the reservation: 1..MaxOrderBytes bytes, no control
	// characters. The same order again answers the same reservation.
	Order string
	// Attributes hold the value of every attribute a cap counts per
	// (Cap.Per), such as "customer": names and values of UTF-8, 1..
	// MaxValueBytes bytes, no control characters; names without '=' or
	// '@', which separate a counter's name from its attribute's value.
	Attributes map[string]string
	// Lines name the promotions, each once: 1..MaxLines.
	Lines []Line
	// Hold is how long the reservation counts unconfirmed: 1ms..
	// Options.MaxHold, from Redis TIME when it is made.
	Hold time.Duration
}

// body is a request's identity in Redis (the record's req): attributes
// and lines, sorted, so the same cart always encodes the same.
type body struct {
	A map[string]string `json:"a,omitempty"`
	L []Line            `json:"l"`
}

func (b *Budget) checkOrder(order string) error {
	if err := checkText(order, MaxOrderBytes); err != nil {
		return invalid("order", "%w", err)
	}
	if !utf8.ValidString(order) {
		return invalid("order", "invalid UTF-8")
	}
	return nil
}

// check validates the lines and attributes of a request against the
// promotions defined now, and returns its body, sorted.
func (b *Budget) check(attrs map[string]string, lines []Line) (body, []Promotion, error) {
	if len(lines) == 0 || len(lines) > MaxLines {
		return body{}, nil, invalid("lines", "%d lines (allowed 1..%d)", len(lines), MaxLines)
	}
	// UTF-8 only: a record holds attributes as JSON, which turns bad bytes
	// into U+FFFD, so a confirmation (and a ledger, and a Rebuild from
	// it) would name another value than the counters count under.
	for k, v := range attrs {
		if err := checkText(k, MaxValueBytes); err != nil || strings.ContainsAny(k, "=@") || !utf8.ValidString(k) {
			return body{}, nil, invalid("attributes", "name %q (1..%d bytes of UTF-8, no control characters, '=' or '@')", k, MaxValueBytes)
		}
		if err := checkText(v, MaxValueBytes); err != nil {
			return body{}, nil, invalid("attributes", "%s: %w", k, err)
		}
		if !utf8.ValidString(v) {
			return body{}, nil, invalid("attributes", "%s: invalid UTF-8", k)
		}
	}
	ls := slices.Clone(lines)
	slices.SortFunc(ls, func(x, y Line) int { return strings.Compare(x.Promotion, y.Promotion) })
	ps := make([]Promotion, len(ls))
	b.mu.RLock()
	defer b.mu.RUnlock()
	for i, l := range ls {
		if i > 0 && ls[i-1].Promotion == l.Promotion {
			return body{}, nil, invalid("lines", "promotion %q named twice", l.Promotion)
		}
		p, ok := b.promos[l.Promotion]
		if !ok {
			return body{}, nil, invalid("promotion", "%q is not defined in budget %q", l.Promotion, b.name)
		}
		if l.Uses < 1 || l.Uses > MaxAmount {
			return body{}, nil, invalid("uses", "promotion %q: %d (allowed 1..2^53)", l.Promotion, l.Uses)
		}
		if l.Amount < 0 || l.Amount > MaxAmount {
			return body{}, nil, invalid("amount", "promotion %q: %d minor units (allowed 0..2^53)", l.Promotion, l.Amount)
		}
		for _, c := range p.Caps {
			if c.Per != "" && attrs[c.Per] == "" {
				return body{}, nil, invalid("attributes", "promotion %q counts per %q: its value is missing", l.Promotion, c.Per)
			}
		}
		ps[i] = p
	}
	var a map[string]string
	if len(attrs) > 0 {
		a = attrs
	}
	return body{A: a, L: ls}, ps, nil
}

// appendEncoded appends the body as encoding/json writes it: byte for
// byte, since a record's req is compared with the same cart sent again.
// Plain text (the common case) is written here, the rest by
// encoding/json.
func (bd body) appendEncoded(buf []byte) []byte {
	if out, ok := bd.appendPlain(buf); ok {
		return out
	}
	out, err := json.Marshal(bd)
	if err != nil { // strings and integers only: cannot fail
		panic(fmt.Sprintf("budget: encode request: %v", err))
	}
	return append(buf, out...)
}

// appendPlain appends bd as encoding/json would, when no string of it
// needs escaping there (printable ASCII but '"', '\\', '<', '>' and
// '&'); ok false and buf unchanged otherwise.
func (bd body) appendPlain(buf []byte) ([]byte, bool) {
	n := 16
	for k, v := range bd.A {
		if !plainText(k) || !plainText(v) {
			return buf, false
		}
		n += len(k) + len(v) + 6
	}
	for _, l := range bd.L {
		if !plainText(l.Promotion) {
			return buf, false
		}
		n += len(l.Promotion) + 48
	}
	buf = slices.Grow(buf, n)
	buf = append(buf, '{')
	if len(bd.A) > 0 {
		buf = append(buf, `"a":{`...)
		names := make([]string, 0, len(bd.A))
		for k := range bd.A {
			names = append(names, k)
		}
		slices.Sort(names)
		for i, k := range names {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, '"')
			buf = append(buf, k...)
			buf = append(buf, `":"`...)
			buf = append(buf, bd.A[k]...)
			buf = append(buf, '"')
		}
		buf = append(buf, "},"...)
	}
	buf = append(buf, `"l":[`...)
	for i, l := range bd.L {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"p":"`...)
		buf = append(buf, l.Promotion...)
		buf = append(buf, `","u":`...)
		buf = strconv.AppendInt(buf, l.Uses, 10)
		if l.Amount != 0 {
			buf = append(buf, `,"a":`...)
			buf = strconv.AppendInt(buf, l.Amount, 10)
		}
		buf = append(buf, '}')
	}
	buf = append(buf, "]}"...)
	return buf, true
}

// plainText reports whether encoding/json writes s as it is between
// quotes.
func plainText(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// DecodeRequest decodes a req as the confirmation log holds it.
func DecodeRequest(req string) (attrs map[string]string, lines []Line, err error) {
	var bd body
	if err := json.Unmarshal([]byte(req), &bd); err != nil {
		return nil, nil, fmt.Errorf("budget: decode request: %w", err)
	}
	return bd.A, bd.L, nil
}

// capRef is what a cap argument stands for, to name it in a LimitError.
type capRef struct {
	promo string
	cap   Cap
	asked int64
}

// capSpec is one cap argument: its counter field, delta and limit, and
// the candidate periods it may count in.
type capSpec struct {
	field        string
	delta, limit int64
	cands        []cand
}

// capSpecs lists the caps of a request for Redis TIME about now. Caps
// that count in one counter (same key and field) are listed once, with
// the lowest limit, so a delta is never added twice.
// specs is appended to (a caller's array on its stack, or nil).
func capSpecs(specs []capSpec, bd body, ps []Promotion, now time.Time) ([]capSpec, []capRef) {
	var refs []capRef
	for i, l := range bd.L {
	next:
		for _, c := range ps[i].Caps {
			cs := candidates(l.Promotion, c, now)
			f := field(c, bd.A)
			d := l.Uses
			if c.Measure == Spend {
				d = l.Amount
			}
			// A cart has few caps: a scan finds the same counter sooner
			// than a map is made.
			for k := range specs {
				if sp := &specs[k]; sp.field == f && sp.counter() == cs[len(cs)/2].suffix {
					if c.Limit < sp.limit {
						refs[k].cap = c
						sp.limit = c.Limit
					}
					continue next
				}
			}
			refs = append(refs, capRef{promo: l.Promotion, cap: c, asked: d})
			specs = append(specs, capSpec{field: f, delta: d, limit: c.Limit, cands: cs})
		}
	}
	return specs, refs
}

// counter is the key suffix of the period holding now (the middle
// candidate).
func (c *capSpec) counter() string { return c.cands[len(c.cands)/2].suffix }

// capArgs builds the caps ARGV of a request for Redis TIME about now
// (caps in lib.lua): per cap field, delta, limit, ncand and the
// candidates; zero sends every delta as 0.
func capArgs(bd body, ps []Promotion, now time.Time, zero bool) ([]any, []capRef) {
	specs, refs := capSpecs(nil, bd, ps, now)
	args := make([]any, 0, 1+len(specs)*13)
	args = append(args, len(specs))
	for _, c := range specs {
		d := c.delta
		if zero {
			d = 0
		}
		args = append(args, c.field, d, c.limit, len(c.cands))
		for _, cd := range c.cands {
			args = append(args, cd.suffix, cd.start, cd.end)
		}
	}
	return args, refs
}

// appendCaps appends capArgs as one string to buf, each argument
// followed by a tab (no field holds one: checkText), for reserve.lua: a
// request's caps, which a batch parses once for all its requests that
// send the same.
func appendCaps(buf []byte, bd body, ps []Promotion, now time.Time) ([]byte, []capRef) {
	var sa [4]capSpec // on the stack for a cart of a few caps
	specs, refs := capSpecs(sa[:0], bd, ps, now)
	buf = strconv.AppendInt(buf, int64(len(specs)), 10)
	buf = append(buf, '\t')
	for _, c := range specs {
		buf = append(buf, c.field...)
		buf = append(buf, '\t')
		buf = strconv.AppendInt(buf, c.delta, 10)
		buf = append(buf, '\t')
		buf = strconv.AppendInt(buf, c.limit, 10)
		buf = append(buf, '\t')
		buf = strconv.AppendInt(buf, int64(len(c.cands)), 10)
		buf = append(buf, '\t')
		for _, cd := range c.cands {
			buf = append(buf, cd.suffix...)
			buf = append(buf, '\t')
			buf = strconv.AppendInt(buf, cd.start, 10)
			buf = append(buf, '\t')
			buf = strconv.AppendInt(buf, cd.end, 10)
			buf = append(buf, '\t')
		}
	}
	return buf, refs
}
