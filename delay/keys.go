package delay

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tierset/tierset/internal/keyname"
)

// Name and key limits, checked in Go before anything is sent.
const (
	// maxNameBytes is the longest queue name (and key prefix).
	maxNameBytes = 128
	// MaxKeyBytes is the longest business key.
	MaxKeyBytes = 512
	// MaxTokenBytes is the longest idempotency token.
	MaxTokenBytes = 128
	// maxTasksPerKey caps the tasks (tokens) one business key may hold at once,
	// which bounds every per-key script loop.
	maxTasksPerKey = 64
	// DefaultPrefix is the key prefix when Options.Prefix is empty.
	DefaultPrefix = "tierset"
)

// validateName reports whether name is a usable queue name: 1..maxNameBytes
// bytes of valid UTF-8 with no braces, glob characters, whitespace or
// control characters (the one check of internal/keyname).
func validateName(name string) error {
	if err := keyname.Check(name); err != nil {
		return invalid("name", "%w", err)
	}
	return nil
}

func validatePrefix(p string) error {
	if err := keyname.Check(p); err != nil {
		return invalid("prefix", "%w", err)
	}
	return nil
}

func validateKey(k string) error {
	if k == "" || len(k) > MaxKeyBytes {
		return invalid("key", "length %d (allowed 1..%d)", len(k), MaxKeyBytes)
	}
	if r, bad := badRune(k); bad {
		return invalid("key", "holds %q", r)
	}
	return nil
}

// validateToken allows "" (the library makes the token). A comma is refused
// so a token can never look like an index list.
func validateToken(tok string) error {
	if len(tok) > MaxTokenBytes {
		return invalid("token", "length %d (max %d)", len(tok), MaxTokenBytes)
	}
	if r, bad := badRune(tok); bad || r == ',' {
		return invalid("token", "holds %q", r)
	}
	for _, r := range tok {
		if r == ',' {
			return invalid("token", "holds ','")
		}
	}
	return nil
}

// badRune finds invalid UTF-8 and control characters in a business key or
// token (names go through keyname.Check).
func badRune(s string) (rune, bool) {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return r, true
			}
		}
		if unicode.IsControl(r) {
			return r, true
		}
	}
	return 0, false
}

// keys is the whole key layout of one queue; nothing else builds key
// names. This table is the one written list of the delay package's keys:
// the package doc, docs/design.md and docs/cluster.md point here.
//
//	<prefix>:{q:<name>}:due         ZSET  task ID -> TimeCodec(due ms, seq)
//	<prefix>:{q:<name>}:inflight    ZSET  task ID -> lease deadline (Unix ms, Redis TIME)
//	<prefix>:{q:<name>}:lease       HASH  task ID -> fence of its current delivery (in flight only)
//	<prefix>:{q:<name>}:dead        ZSET  task ID -> dead-letter time (Unix ms)
//	<prefix>:{q:<name>}:done        ZSET  task ID -> end of its tombstone (Unix ms; Options.DoneTTL only)
//	<prefix>:{q:<name>}:tasks:<b>   HASH  task ID -> record (header, key, token, last error, payload);
//	                                      b = the ID without its last base-36 digit
//	<prefix>:{q:<name>}:idx         HASH  key digest -> comma-separated task IDs
//	                                      (of every key with that digest, see digest)
//	<prefix>:{q:<name>}:ctr         HASH  id, fence counters; ms, seq of the last score;
//	                                      hw, hww, hwp: the per-ms high-water mark (HighWater)
//	<prefix>:{q:<name>}:ctl         HASH  paused (since, Unix ms); rate, burst, tok, ts: the
//	                                      rate limit's token bucket (absent: running, no limit)
//	<prefix>:{q:<name>}:stats       HASH  counters (delivered, acked, retries, dead, expired,
//	                                      cancelled, overflow, corrupt, lost, restored, ctr_lost,
//	                                      idx_lost) and the lateness histogram
//	<prefix>:{q:<name>}:wake        LIST  at most one element, expires after 60 s; pushed when
//	                                      the head moves earlier
//	<prefix>:{q:<name>}:hist        HASH  "<slot>:<metric>" -> count, slot = Unix minute mod 1440:
//	                                      m (the minute it counts), ok, r, d, ls, l0..l4 (history.go;
//	                                      written by workers from Go, never by a script), PEXPIRE 25 h
//	<prefix>:{q:<name>}:rp:<nonce>:<bucket>
//	                                HASH  slot -> the kept reply of the mutating call whose
//	                                      request ID is <nonce>:<bucket>:<slot>; no TTL (reply.lua)
//	<prefix>:{q:<name>}:rp:idx      ZSET  reply hash -> when its latest reply ends (Unix ms,
//	                                      Redis TIME + Options.ReplyTTL); swept by the calls
//
// and, shared by every queue under a prefix, the worker registry
// (registry.go, registryKeys):
//
//	<prefix>:{workers}:live         ZSET    pool ID -> its last heartbeat (Unix ms, Redis TIME)
//	<prefix>:{workers}:w:<id>       STRING  the pool's WorkerInfo as JSON, PX 3 × Heartbeat
//	<prefix>:{workers}:o:<id>       STRING  the owner token of the Run holding the ID, same PX
//
// The tasks field holds a base name: records live in small bucket hashes
// under it, which Redis keeps listpack-encoded (see the package doc,
// "Memory"). Every bucket name starts with its base name, so it carries
// the queue's hash tag and stays on the queue's slot.
type keys struct {
	due, inflight, lease, dead, done, tasks, idx, ctr, stats, wake, ctl, hist string
	// rp is the base name of the reply keys (rp + request ID); rpIdx is
	// their index by time, which reply.lua derives from a reply key.
	rp, rpIdx string
}

// reply is the key that keeps the reply of the mutating call req.
func (k keys) reply(req string) string { return k.rp + req }

// replyAt is where reply.lua keeps the reply of req: its hash and field.
func (k keys) replyAt(req string) (hash, field string) {
	name := k.reply(req)
	i := strings.LastIndexByte(name, ':') // after the tag: the name has ":rp:"
	return name[:i], name[i+1:]
}

// taskBucket is the hash that holds the record of task id (tkey in lib.lua).
func (k keys) taskBucket(id string) string {
	if id == "" {
		return k.tasks + ":"
	}
	return k.tasks + ":" + id[:len(id)-1]
}

// digestLen is the length of a key digest: 6 characters of 6 bits, which
// Redis stores in an 8-byte allocation as an index field (a 25-byte key
// takes 32). Lua checks the same length (DIGEST_LEN in lib.lua).
const digestLen = 6

const digestAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// digest is the index field of a business key: the top 36 bits of its
// FNV-1a 64 hash in base64url. Keys that share a digest share one index
// entry, and every script that reads an entry tells them apart by the key
// in each record, so a collision (about 7% of 100k keys have a partner)
// costs reads, never correctness. Go computes it; each record stores it,
// so Lua never hashes.
func digest(key string) string {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	var b [digestLen]byte
	for i := range b {
		b[i] = digestAlphabet[(h>>(58-6*i))&63]
	}
	return string(b[:])
}

func newKeys(prefix, name string) keys {
	base := prefix + ":" + keyname.QueueTag(name) + ":"
	return keys{
		due:      base + "due",
		inflight: base + "inflight",
		lease:    base + "lease",
		dead:     base + "dead",
		done:     base + "done",
		tasks:    base + "tasks",
		idx:      base + "idx",
		ctr:      base + "ctr",
		stats:    base + "stats",
		wake:     base + "wake",
		ctl:      base + "ctl",
		hist:     base + "hist",
		rp:       base + "rp:",
		rpIdx:    base + "rp:idx",
	}
}

// all lists the fixed keys of the queue and the base name of its record
// buckets (for the slot guard, tests and tooling).
func (k keys) all() []string {
	return []string{k.due, k.inflight, k.lease, k.dead, k.done, k.tasks, k.idx, k.ctr, k.stats, k.wake, k.ctl, k.hist}
}
