// Package cacheraw reaches the member decoder of package cache, which
// cache does not export: the tiers ZSET's member format is storage, not
// API. The bench's full-scan baseline decodes members with it, so it
// measures the access pattern with the library's own decoder.
package cacheraw

import (
	_ "unsafe" // go:linkname

	"github.com/tierset/tierset/cache"
)

// DecodeTier decodes one member of a promotion's tiers ZSET, as ZRANGE
// returns it, with the guards Match applies; ok is false for the floor
// and ceiling sentinels. See cache's decodeTier.
//
//go:linkname DecodeTier github.com/tierset/tierset/cache.decodeTier
func DecodeTier(raw string) (hit cache.TierHit, ok bool, err error)
