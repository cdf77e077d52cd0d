package cache

// Key layout, the one written list of the cache package's keys (the
// package doc and docs/design.md point here). Every key of one promotion
// shares the hash tag {p:<id>}, so each transaction and each read touches
// one Redis Cluster slot:
//
//	<prefix>:{p:<id>}:tiers            ZSET    one member per tier (score = threshold) + floor (-1) + ceiling (2^53)
//	<prefix>:{p:<id>}:meta             HASH    version, metric, digits, window, counts, updated
//	<prefix>:{p:<id>}:gifts:<version>  HASH    tier ID -> msgpack gift list
//	<prefix>:{p:<id>}:absent           STRING  read-through: the source does not know <id> ("1") or it ended ("ended"), PX MissTTL
//	<prefix>:{p:<id>}:lease            STRING  read-through: the process loading <id>, SET NX PX LeaseTTL; every write and delete DELs it
//	<prefix>:{p:<id>}:tomb             STRING  an ordered Delete's revision, PX TombstoneTTL
//	<prefix>:{<slot tag>}:ids          SET     promotion index: the IDs whose keys live on that slot (index.go)
//	<prefix>:index                     STRING  "1": the index is complete, List reads it (set by Reindex)
//
// The index keys are the exception to one tag per promotion: one per
// Cluster slot, named by slot.TagOf so it shares the slot (not the tag)
// of the promotions it lists and joins their transactions.
//
// IDs are checked by gradient.ValidateID (no braces, whitespace or control
// characters) before any key is built, and New refuses prefixes with
// braces, so no ID or prefix can move a key to another slot.

const (
	tagOpen     = ":{p:"
	suffixTiers = "}:tiers"
	suffixMeta  = "}:meta"
	suffixGifts = "}:gifts:"
)

func (c *Cache) tiersKey(id string) string { return c.prefix + tagOpen + id + suffixTiers }

func (c *Cache) metaKey(id string) string { return c.prefix + tagOpen + id + suffixMeta }

func (c *Cache) giftsKey(id, version string) string {
	return c.prefix + tagOpen + id + suffixGifts + version
}

// metaPattern is the SCAN MATCH pattern of every meta key under the prefix.
// New refuses glob characters in the prefix, so only the ID part matches
// freely.
func (c *Cache) metaPattern() string { return c.prefix + tagOpen + "*" + suffixMeta }

// idFromMetaKey extracts the promotion ID from a meta key, or "" when the
// key does not have the meta key's shape.
func (c *Cache) idFromMetaKey(key string) string {
	head := c.prefix + tagOpen
	if len(key) <= len(head)+len(suffixMeta) || key[:len(head)] != head || key[len(key)-len(suffixMeta):] != suffixMeta {
		return ""
	}
	return key[len(head) : len(key)-len(suffixMeta)]
}

// Read-through keys (absent, lease), under the promotion's hash tag so a
// lease, a remembered miss and the refresh that clears it share one slot,
// and the tombstone an ordered Delete leaves, so a writer that read the
// promotion before the delete cannot bring it back.
const (
	suffixAbsent = "}:absent"
	suffixLease  = "}:lease"
	suffixTomb   = "}:tomb"
)

func (c *Cache) tombKey(id string) string { return c.prefix + tagOpen + id + suffixTomb }

func (c *Cache) absentKey(id string) string { return c.prefix + tagOpen + id + suffixAbsent }

func (c *Cache) leaseKey(id string) string { return c.prefix + tagOpen + id + suffixLease }
