package cache

// Key layout. Every key of one promotion shares the hash tag {p:<id>}, so
// each transaction and each read touches one Redis Cluster slot:
//
//	<prefix>:{p:<id>}:tiers            ZSET  member record per tier + floor + ceiling
//	<prefix>:{p:<id>}:meta             HASH  version, metric, digits, window, counts
//	<prefix>:{p:<id>}:gifts:<version>  HASH  tier ID -> msgpack gift list
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

// Read-through keys, under the promotion's hash tag so a lease, a
// remembered miss and the refresh that clears it share one slot:
//
//	<prefix>:{p:<id>}:absent   STRING  the source said no such promotion (PX MissTTL)
//	<prefix>:{p:<id>}:lease    STRING  one process is loading it (SET NX PX LeaseTTL)
//
// and the tombstone an ordered Delete leaves, so a writer that read the
// promotion before the delete cannot bring it back:
//
//	<prefix>:{p:<id>}:tomb     STRING  the revision it was deleted at (PX TombstoneTTL)
const (
	suffixAbsent = "}:absent"
	suffixLease  = "}:lease"
	suffixTomb   = "}:tomb"
)

func (c *Cache) tombKey(id string) string { return c.prefix + tagOpen + id + suffixTomb }

func (c *Cache) absentKey(id string) string { return c.prefix + tagOpen + id + suffixAbsent }

func (c *Cache) leaseKey(id string) string { return c.prefix + tagOpen + id + suffixLease }
