package delay

import (
	"fmt"
	"strings"
)

// record is one task's metadata and payload as stored in its tasks bucket:
//
//	"<attempt>,<fence>,<flags>,<ib>,<keylen>,<toklen>,<errlen>;<key><token><err><payload>"
//
// ib is the key's index bucket (indexBucketOf). A plain length-prefixed text
// header keeps a fresh task with a 25-byte key and a 16-byte payload at 59
// bytes, under Redis's default hash-max-listpack-value (64), and lets Lua
// read it without cmsgpack, which miniredis lacks.
type record struct {
	attempt int
	fence   int64
	flags   int
	ib      int
	key     string
	token   string
	err     string
	payload []byte
}

const flagCancelled = 1

// maxHeader bounds the header scan: seven numbers of at most 15 digits.
const maxHeader = 7 * 16

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
	if end < 0 {
		return record{}, fmt.Errorf("%w: no header", ErrCorrupt)
	}
	// seven comma-separated decimal fields of 1..15 digits, parsed by hand:
	// this runs for every task a worker takes
	var n [7]int64
	f, digits := 0, 0
	for i := 0; i < end; i++ {
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
	if n[3] >= MaxIndexBuckets {
		return record{}, fmt.Errorf("%w: index bucket %d", ErrCorrupt, n[3])
	}
	kl, tl, el := n[4], n[5], n[6]
	if kl+tl+el > int64(len(body)) {
		return record{}, fmt.Errorf("%w: lengths exceed record", ErrCorrupt)
	}
	if pl := int64(len(body)) - kl - tl - el; maxPayload > 0 && pl > int64(maxPayload) {
		return record{}, fmt.Errorf("%w: payload of %d bytes above the cap", ErrCorrupt, pl)
	}
	rec = record{
		attempt: int(n[0]),
		fence:   n[1],
		flags:   int(n[2]),
		ib:      int(n[3]),
		key:     body[:kl],
		token:   body[kl : kl+tl],
		err:     body[kl+tl : kl+tl+el],
		payload: []byte(body[kl+tl+el:]),
	}
	if err := validateKey(rec.key); err != nil {
		return record{}, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return rec, nil
}

// encodeRecord is the Go twin of lib.lua's build (used by tests to plant data).
func encodeRecord(r record) string {
	return fmt.Sprintf("%d,%d,%d,%d,%d,%d,%d;%s%s%s%s", r.attempt, r.fence, r.flags, r.ib,
		len(r.key), len(r.token), len(r.err), r.key, r.token, r.err, r.payload)
}
