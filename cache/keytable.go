package cache

import "sync/atomic"

// keySets and keyWays size a Cache's table of built tiers keys
// (keyTable): 1,024 keys, 4 to a set.
const (
	keySets = 256
	keyWays = 4
)

// tiersKeyArg is a promotion's tiers key, built once and kept with the
// key boxed as a command argument, so a match sends it without building
// the string or boxing it again.
type tiersKeyArg struct {
	tag uint32 // ownerTag of id
	id  string // a substring of key
	key string
	arg any // key, boxed
}

// keyTable holds the tiers keys of recently matched promotions in sets
// of keyWays, chosen by ownerTag: a promotion not held takes an empty
// way of its set, else replaces one. Entries are never written once
// published, so readers share them without a lock; the table is bounded
// (keySets*keyWays keys, each at most MaxIDLen plus the prefix).
type keyTable struct {
	slots [keySets * keyWays]atomic.Pointer[tiersKeyArg]
}

// tiersKeyArg returns the tiers key of promotion id, whose ownerTag is
// tag.
func (c *Cache) tiersKeyArg(id string, tag uint32) *tiersKeyArg {
	set := c.keys.slots[(tag^tag>>16)%keySets*keyWays:][:keyWays]
	free := -1
	for w := range set {
		e := set[w].Load()
		if e == nil {
			if free < 0 {
				free = w
			}
			continue
		}
		if e.tag == tag && e.id == id {
			return e
		}
	}
	if free < 0 {
		free = int(tag>>30) % keyWays // a full set: the way tag's top bits name
	}
	key := c.tiersKey(id)
	e := &tiersKeyArg{tag: tag, id: key[len(c.prefix)+len(tagOpen) : len(key)-len(suffixTiers)], key: key, arg: key}
	set[free].Store(e)
	return e
}
