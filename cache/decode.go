package cache

import _ "unsafe" // go:linkname

// decodeTier decodes one member of a promotion's tiers ZSET, as ZRANGE
// returns it, with the same guards Match applies (size cap of
// defaultMaxRecordBytes, every length checked, input consumed whole, no
// panic). ok is false for the floor and ceiling sentinels, which describe
// the promotion rather than a tier. It is for tools that read the keys
// directly, such as audits, exporters and the full-scan baseline that
// bench/ measures Match against; it does not use the decode memo. It is
// not told the promotion, so it cannot check the member's owner tag as
// Match does. The member format is storage, not API: tools of this
// repository reach it through internal/cacheraw, which links here.
//
//go:linkname decodeTier
func decodeTier(raw string) (hit TierHit, ok bool, err error) {
	m, err := decodeMember(raw, defaultMaxRecordBytes)
	if err != nil {
		return TierHit{}, false, err
	}
	if m.kind != kindTier {
		return TierHit{}, false, nil
	}
	return TierHit{ID: m.tierID, Score: m.score, Threshold: m.scoreValue(m.score), Reward: m.reward, HasGifts: m.hasGifts}, true, nil
}
