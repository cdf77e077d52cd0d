package cache

import (
	"hash/maphash"
	"sync"

	"github.com/shopspring/decimal"
)

// memoMaxMember bounds the member records the memo keeps: larger ones
// (legal up to MaxRecordBytes, but far beyond what any real tier needs)
// are decoded on every read, so a few huge records cannot inflate the
// memo's memory.
const memoMaxMember = 512

// memoShards spreads the memo over independently locked maps, so
// concurrent cart matches rarely touch the same lock.
const memoShards = 16

// decoded is a memoized member record with what a hit derives from it.
type decoded struct {
	// raw is the record's bytes, compared on every memo hit: the memo is
	// keyed by a 64-bit hash and a collision must not serve another
	// record.
	raw string
	m   member
	// threshold is m.scoreValue(m.score), for tier members.
	threshold decimal.Decimal
}

// memo holds decoded member records keyed by their exact bytes (a hash,
// then a comparison). A member
// embeds its promotion's version, a hash of the promotion's content, so
// equal bytes always decode to the same record: an entry can never be
// stale, only unused. Only records that decoded cleanly are stored, so a
// corrupt member is decoded (and refused) on every read. Each shard holds
// at most perShard entries and evicts a random one when full: bounded, and
// a working set that fits is never evicted.
type memo struct {
	seed     maphash.Seed
	perShard int
	shards   []memoShard
}

type memoShard struct {
	mu sync.RWMutex
	m  map[uint64]*decoded
	_  [40]byte // keep shards on separate cache lines
}

// newMemo returns a memo of at most size entries, nil (no memo) when size
// is not positive.
func newMemo(size int) *memo {
	if size <= 0 {
		return nil
	}
	n := min(memoShards, size)
	mo := &memo{seed: maphash.MakeSeed(), perShard: size / n, shards: make([]memoShard, n)}
	for i := range mo.shards {
		mo.shards[i].m = make(map[uint64]*decoded)
	}
	return mo
}

func (mo *memo) shard(raw string) (*memoShard, uint64) {
	h := maphash.String(mo.seed, raw)
	return &mo.shards[h%uint64(len(mo.shards))], h
}

func (mo *memo) get(raw string) *decoded {
	if mo == nil || len(raw) > memoMaxMember {
		return nil
	}
	sh, h := mo.shard(raw)
	sh.mu.RLock()
	d := sh.m[h]
	sh.mu.RUnlock()
	if d == nil || d.raw != raw {
		return nil
	}
	return d
}

// put stores d, which must be the clean decode of d.raw.
func (mo *memo) put(d *decoded) {
	if mo == nil || len(d.raw) > memoMaxMember {
		return
	}
	sh, h := mo.shard(d.raw)
	sh.mu.Lock()
	if _, present := sh.m[h]; !present && len(sh.m) >= mo.perShard {
		// Evict one entry at random (map iteration starts at a random
		// place), so a working set a little larger than the memo keeps a
		// hit rate near size/working set instead of falling to zero
		// each time a shard fills.
		for k := range sh.m {
			delete(sh.m, k)
			break
		}
	}
	sh.m[h] = d
	sh.mu.Unlock()
}

// len counts the entries (tests).
func (mo *memo) len() int {
	if mo == nil {
		return 0
	}
	n := 0
	for i := range mo.shards {
		mo.shards[i].mu.RLock()
		n += len(mo.shards[i].m)
		mo.shards[i].mu.RUnlock()
	}
	return n
}
