// Package keyname is the one check of the names the repository builds
// Redis keys from (key prefixes, queue names) and the one default prefix.
package keyname

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// DefaultPrefix is the key prefix of every package when none is given.
const DefaultPrefix = "tierset"

// QueueTag returns the Redis Cluster hash tag of a delay queue:
// "{q:<name>}". Every key of the queue carries it, so every script of the
// queue runs on one slot. A sharded queue of K shards composes K queues
// named "<name>:0".."<name>:K-1", each on its own tag.
func QueueTag(name string) string { return "{q:" + name + "}" }

// MaxBytes is the longest name.
const MaxBytes = 128

// forbidden are the ASCII characters a name may not hold: braces would
// move a key's cluster hash tag, and glob characters would change the SCAN
// patterns the name is part of.
const forbidden = "{}*?[]\\"

// Check reports why name cannot go into a key: a length outside
// 1..MaxBytes, invalid UTF-8, a control or whitespace character, a brace
// or a glob character. Callers wrap the error with their own sentinel.
func Check(name string) error {
	if name == "" || len(name) > MaxBytes {
		return fmt.Errorf("length %d (allowed 1..%d)", len(name), MaxBytes)
	}
	for i, r := range name {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(name[i:]); size <= 1 {
				return fmt.Errorf("%q holds invalid UTF-8 at byte %d", name, i)
			}
		}
		if unicode.IsControl(r) || unicode.IsSpace(r) || strings.ContainsRune(forbidden, r) {
			return fmt.Errorf("%q holds %q", name, r)
		}
	}
	return nil
}
