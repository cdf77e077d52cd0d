package delay

import (
	"fmt"
	"strconv"
	"strings"
)

// record is one task's metadata and payload as stored in its tasks bucket:
//
//	"<flags><digest><attempt>,<keylen>,<toklen>,<errlen>;<key><token><err><payload>"
//
// err holds the task's last errors (decodeErrs): one text bare, as every
// record held before more were kept, or up to errsKept texts as a list.
// The header did not change, so a process of either version reads the
// other's records whole (an older one shows a list as one raw text).
//
// flags is one digit (flagCancelled, flagSole) and digest the key's
// digestLen characters, at fixed places so that Lua's hot paths (ack) read
// them without a pattern match. attempt counts the deliveries that ended
// without an ack. A plain length-prefixed text header keeps a fresh task
// with a 25-byte key and a 16-byte payload at 58 bytes, under Redis's
// default hash-max-listpack-value (64), and lets Lua read it without
// cmsgpack, which miniredis lacks. Go writes fresh records (freshRecord);
// Lua rewrites them (build in lib.lua) when a task changes.
type record struct {
	attempt int
	flags   int
	digest  string
	key     string
	token   string
	err     string   // the newest of errs, "" when none
	errs    []string // the last errors, oldest first (decodeErrs)
	payload []byte
}

// The err field's list, written by push_err in lib.lua: each text is
// errMark, its length in decimal, ':' and the text. The oldest text is
// dropped beyond errsKept texts or errsBytes bytes of text, so a record
// grows by at most that much (each text is capped at maxErrText).
const (
	errsKept  = 3
	errsBytes = 2048
	errMark   = '\x1e'
)

// decodeErrs reads an err field: its texts, oldest first, and nil for an
// empty field. A field that is not a whole list is one bare text, as
// every record held before lists were kept.
func decodeErrs(f string) []string {
	if f == "" {
		return nil
	}
	if f[0] != errMark {
		return []string{f}
	}
	var out []string
	for p := 0; p < len(f); {
		if f[p] != errMark {
			return []string{f}
		}
		colon := strings.IndexByte(f[p+1:min(len(f), p+7)], ':')
		if colon < 1 {
			return []string{f}
		}
		n, err := strconv.Atoi(f[p+1 : p+1+colon])
		start := p + 2 + colon
		if err != nil || n < 0 || n > len(f)-start {
			return []string{f}
		}
		out = append(out, f[start:start+n])
		p = start + n
	}
	return out
}

// encodeErrs is the Go twin of push_err's output for a list already
// bounded (used by tests to plant data).
func encodeErrs(errs []string) string {
	if len(errs) == 1 && (errs[0] == "" || errs[0][0] != errMark) {
		return errs[0]
	}
	var b strings.Builder
	for _, e := range errs {
		b.WriteByte(errMark)
		b.WriteString(strconv.Itoa(len(e)))
		b.WriteByte(':')
		b.WriteString(e)
	}
	return b.String()
}

const (
	flagCancelled = 1
	flagSole      = 2
	flagDone      = 4 // a tombstone (Options.DoneTTL)
)

// maxHeader bounds the header scan: flags, digest and four numbers of at
// most 15 digits.
const maxHeader = 1 + digestLen + 4*16

// decodeRecord parses a record read from Redis. It never panics and never
// allocates more than the input: every length is checked against the bytes
// actually present and against maxPayload.
func decodeRecord(blob string, maxPayload int) (rec record, err error) {
	defer func() {
		if r := recover(); r != nil {
			rec, err = record{}, fmt.Errorf("%w: %v", ErrCorrupt, r)
		}
	}()
	end := strings.IndexByte(blob[:min(len(blob), maxHeader)], ';')
	if end < 1+digestLen {
		return record{}, fmt.Errorf("%w: no header", ErrCorrupt)
	}
	if c := blob[0]; c < '0' || c > '9' {
		return record{}, fmt.Errorf("%w: header flags", ErrCorrupt)
	}
	dg := blob[1 : 1+digestLen]
	if !isDigest(dg) {
		return record{}, fmt.Errorf("%w: header digest", ErrCorrupt)
	}
	// four comma-separated decimals of 1..15 digits, parsed by hand: this
	// runs for every task a worker takes
	var n [4]int64
	f, digits := 0, 0
	for i := 1 + digestLen; i < end; i++ {
		switch c := blob[i]; {
		case c >= '0' && c <= '9':
			if digits == 15 {
				return record{}, fmt.Errorf("%w: header field %d", ErrCorrupt, f)
			}
			n[f] = n[f]*10 + int64(c-'0')
			digits++
		case c == ',' && digits > 0 && f < len(n)-1:
			f, digits = f+1, 0
		default:
			return record{}, fmt.Errorf("%w: header field %d", ErrCorrupt, f)
		}
	}
	if f != len(n)-1 || digits == 0 {
		return record{}, fmt.Errorf("%w: %d header fields", ErrCorrupt, f+1)
	}
	body := blob[end+1:]
	kl, tl, el := n[1], n[2], n[3]
	if kl+tl+el > int64(len(body)) {
		return record{}, fmt.Errorf("%w: lengths exceed record", ErrCorrupt)
	}
	if pl := int64(len(body)) - kl - tl - el; maxPayload > 0 && pl > int64(maxPayload) {
		return record{}, fmt.Errorf("%w: payload of %d bytes above the cap", ErrCorrupt, pl)
	}
	rec = record{
		attempt: int(n[0]),
		flags:   int(blob[0] - '0'),
		digest:  dg,
		key:     body[:kl],
		token:   body[kl : kl+tl],
		payload: []byte(body[kl+tl+el:]),
	}
	if rec.errs = decodeErrs(body[kl+tl : kl+tl+el]); len(rec.errs) > 0 {
		rec.err = rec.errs[len(rec.errs)-1]
	}
	if err := validateKey(rec.key); err != nil {
		return record{}, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if d := digest(rec.key); d != rec.digest {
		return record{}, fmt.Errorf("%w: digest %q, key's is %q", ErrCorrupt, rec.digest, d)
	}
	return rec, nil
}

// isDigest reports whether s is digestLen characters of digestAlphabet.
func isDigest(s string) bool {
	if len(s) != digestLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(digestAlphabet, s[i]) < 0 {
			return false
		}
	}
	return true
}

// encodeRecord is the Go twin of lib.lua's build (used by tests to plant
// data). Its err field is r.errs as a list when set, else r.err as it is.
func encodeRecord(r record) string {
	ef := r.err
	if r.errs != nil {
		ef = encodeErrs(r.errs)
	}
	return fmt.Sprintf("%d%s%d,%d,%d,%d;%s%s%s%s", r.flags, r.digest, r.attempt,
		len(r.key), len(r.token), len(ef), r.key, r.token, ef, r.payload)
}

// freshRecord is the record of a new task as the enqueue scripts store it:
// flag F_SOLE (the scripts clear it when the key's index entry already
// holds tasks), attempt 0, no error. Built here rather than in Lua because
// string building is most of an enqueue's server time.
func freshRecord(dg, key, token string, payload []byte) string {
	var b strings.Builder
	b.Grow(24 + len(key) + len(token) + len(payload))
	b.WriteByte('0' + flagSole)
	b.WriteString(dg)
	b.WriteString("0,")
	b.WriteString(strconv.Itoa(len(key)))
	b.WriteByte(',')
	b.WriteString(strconv.Itoa(len(token)))
	b.WriteString(",0;")
	b.WriteString(key)
	b.WriteString(token)
	b.Write(payload)
	return b.String()
}
