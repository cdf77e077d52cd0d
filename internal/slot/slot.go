// Package slot computes Redis Cluster hash slots, so that a script or
// transaction whose keys would land in different slots is refused on the
// client with a typed error, before anything is sent. Redis would answer
// CROSSSLOT; refusing first keeps a half-sent pipeline from ever existing.
package slot

import (
	"errors"
	"fmt"
	"strings"
)

// Count is the number of hash slots in a Redis Cluster.
const Count = 16384

// ErrCrossSlot is returned when the keys of one atomic operation hash to
// different slots.
var ErrCrossSlot = errors.New("tierset: keys of one atomic operation span hash slots")

// Tag returns the part of key that Redis Cluster hashes: the content of
// the first {...} when it is non-empty, otherwise the whole key.
func Tag(key string) string {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			return key[s+1 : s+1+e]
		}
	}
	return key
}

// Of returns the hash slot of key: CRC16-XMODEM of its tag, mod 16384.
func Of(key string) int {
	return int(crc16(Tag(key)) % Count)
}

// Same returns nil when every key hashes to one slot, and an error
// wrapping ErrCrossSlot naming the first pair that differs.
//
// Keys with byte-identical tags (the library's case: one tag per promotion
// or queue) are accepted without hashing, so the guard costs a few
// string compares per script on the hot path.
func Same(keys ...string) error {
	if len(keys) < 2 {
		return nil
	}
	tag, same := Tag(keys[0]), true
	for _, k := range keys[1:] {
		if Tag(k) != tag {
			same = false
			break
		}
	}
	if same {
		return nil
	}
	first := Of(keys[0])
	for _, k := range keys[1:] {
		if s := Of(k); s != first {
			return fmt.Errorf("%w: %q is in slot %d, %q in slot %d", ErrCrossSlot, keys[0], first, k, s)
		}
	}
	return nil
}

// crc16 is CRC-16/XMODEM (poly 0x1021, init 0), the checksum Redis Cluster uses.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
