package cache

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/keyscan"
)

// Info describes a stored promotion, read from its meta hash.
type Info struct {
	ID string
	// Version is the content hash Refresh compares (16 hex digits).
	Version string
	// Previous is the version this one replaced, "" for the first.
	Previous string
	Metric   gradient.Metric
	// MinorDigits is the promotion's, as gradient.Promotion.MinorDigits
	// reads: 1..9, or gradient.NoMinorDigits (never 0).
	MinorDigits int
	Kind        gradient.RuleKind
	// Start and End are the validity window, zero when open, at
	// millisecond resolution.
	Start, End time.Time
	Tiers      int
	// GiftTiers counts the tiers that have gifts.
	GiftTiers int
	// Updated is when the stored version was written, by the writer's
	// Options.Now.
	Updated time.Time
	// Revision is the source revision stored with it (0: unordered, or
	// written before revisions existed).
	Revision int64
	// Damage says what is missing from the stored promotion (its tiers
	// key, members, its gift lists, or its meta hash), "" when it is
	// whole. A Refresh with its content repairs it.
	Damage string
}

// Info returns a stored promotion's metadata, read from its meta hash,
// and checks that its tiers key and current gift list hash are whole. It
// is ErrNotFound when nothing of the promotion is stored. A damaged
// promotion returns what could be read, with Info.Damage set, and an
// error that matches ErrDamaged. One round trip, plus one when the
// promotion has gifts.
func (c *Cache) Info(ctx context.Context, id string) (Info, error) {
	if err := gradient.ValidateID(id); err != nil {
		return Info{}, invalid("id", "%w", err)
	}
	ins, err := c.infos(ctx, []string{id}, OpInfo)
	if err != nil {
		return Info{}, fmt.Errorf("cache: info %q: %w", id, ctxErr(ctx, err))
	}
	in := ins[0]
	switch {
	case in.err != nil:
		return Info{}, in.err
	case in.absent:
		return Info{}, ErrNotFound
	case in.Damage != "":
		return in.Info, damaged(id, in.Damage)
	}
	return in.Info, nil
}

// readInfo is one promotion's Info as infos read it.
type readInfo struct {
	Info
	absent bool  // neither meta nor tiers stored
	err    error // meta unreadable (ErrCorrupt)
}

// infos reads the meta hash and tiers cardinality of each id in one
// pipeline, then the gift list hash sizes of the versions that have
// gifts in a second (only when some has), and sets each Damage.
func (c *Cache) infos(ctx context.Context, ids []string, op Op) ([]readInfo, error) {
	out := make([]readInfo, len(ids))
	pipe := c.client.Pipeline()
	metas := make([]*redis.MapStringStringCmd, len(ids))
	cards := make([]*redis.IntCmd, len(ids))
	for i, id := range ids {
		metas[i] = pipe.HGetAll(ctx, c.metaKey(id))
		cards[i] = pipe.ZCard(ctx, c.tiersKey(id))
	}
	rts := 1
	defer func() { c.obs.OnRoundTrips(op, rts) }()
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var gpipe redis.Pipeliner
	glens := make([]*redis.IntCmd, len(ids))
	for i, id := range ids {
		r := &out[i]
		m, members := metas[i].Val(), cards[i].Val()
		if len(m) == 0 {
			c.nearAnswered(id, "")
			r.ID, r.absent = id, members == 0
			if members > 0 {
				r.Tiers = max(int(members)-2, 0)
				r.Damage = fmt.Sprintf("meta hash missing, tiers key holds %d members", members)
			}
			continue
		}
		r.Info, r.err = c.parseInfo(id, m)
		if r.err != nil {
			continue
		}
		c.nearAnswered(id, r.Version)
		if want := int64(r.Tiers) + 2; members != want {
			r.Damage = fmt.Sprintf("tiers key holds %d of %d members", members, want)
			if members == 0 {
				r.Damage = "tiers key missing"
			}
		}
		if r.GiftTiers > 0 {
			if gpipe == nil {
				gpipe = c.client.Pipeline()
			}
			glens[i] = gpipe.HLen(ctx, c.giftsKey(id, r.Version))
		}
	}
	if gpipe == nil {
		return out, nil
	}
	rts++
	if _, err := gpipe.Exec(ctx); err != nil {
		return nil, err
	}
	for i, g := range glens {
		r := &out[i]
		if g == nil || r.Damage != "" {
			continue
		}
		switch n := g.Val(); {
		case n == 0:
			r.Damage = "gift list hash of the current version missing"
		case n != int64(r.GiftTiers):
			r.Damage = fmt.Sprintf("gift list hash holds %d of %d lists", n, r.GiftTiers)
		}
	}
	return out, nil
}

func (c *Cache) parseInfo(id string, m map[string]string) (Info, error) {
	var bad string
	num := func(field string) int64 {
		v, err := strconv.ParseInt(m[field], 10, 64)
		if err != nil && bad == "" {
			bad = field
		}
		return v
	}
	in := Info{
		ID:          id,
		Version:     m[metaVersion],
		Previous:    m[metaPrev],
		Metric:      gradient.Metric(num(metaMetric)),
		MinorDigits: minorDigitsOf(int(num(metaDigits))),
		Kind:        gradient.RuleKind(num(metaKind)),
		Start:       windowTime(num(metaStart)),
		End:         windowTime(num(metaEnd)),
		Tiers:       int(num(metaTiers)),
		GiftTiers:   int(num(metaGifts)),
		Updated:     time.UnixMilli(num(metaUpdated)),
		Revision:    revOf(m[metaRev]),
	}
	if bad == "" && in.Version == "" {
		bad = metaVersion
	}
	if bad != "" {
		err := fmt.Errorf("%w: promotion %q meta field %q", ErrCorrupt, id, bad)
		c.obs.OnDecodeError(id, recordMeta, err)
		return Info{}, err
	}
	return in, nil
}

// List returns every promotion stored under the prefix, in no particular
// order (for a warm-up's -prune: list, diff against the rules, Delete).
// On a prefix Reindex has marked it reads the promotion index (16384
// SMEMBERS in one pipeline, split per master on a Cluster; index.go), so
// its cost does not grow with other keys in Redis; before that it SCANs
// for meta keys on every master. It then reads the promotions with their
// tiers cardinality in pipelines of 1000 (and the gift list sizes in one
// more per 1000 when some have gifts). A damaged promotion is listed with
// Info.Damage set; one whose meta hash is gone is not listed (and leaves
// the index).
func (c *Cache) List(ctx context.Context) ([]Info, error) {
	ids, indexed, err := c.listIDs(ctx)
	if err != nil {
		return nil, fmt.Errorf("cache: list: %w", ctxErr(ctx, err))
	}
	out := make([]Info, 0, len(ids))
	var gone []string
	for i := 0; i < len(ids); i += 1000 {
		part := ids[i:min(i+1000, len(ids))]
		ins, err := c.infos(ctx, part, OpList)
		if err != nil {
			return nil, fmt.Errorf("cache: list: %w", ctxErr(ctx, err))
		}
		for k, in := range ins {
			switch {
			case in.err != nil:
				return nil, in.err
			case in.Version == "": // expired or deleted since the scan
				gone = append(gone, part[k])
				continue
			}
			out = append(out, in.Info)
		}
	}
	if indexed {
		if err := c.pruneIndex(ctx, gone); err != nil {
			return nil, fmt.Errorf("cache: list: %w", ctxErr(ctx, err))
		}
	}
	return out, nil
}

// scanIDs lists the promotion IDs under the prefix by their meta keys, on
// every master of a Cluster, each once (SCAN may return a key twice).
func (c *Cache) scanIDs(ctx context.Context) ([]string, error) {
	var mu sync.Mutex
	seen := map[string]bool{}
	var ids []string
	err := keyscan.Each(ctx, c.client, c.metaPattern(), func(_ context.Context, _ redis.Cmdable, key string) error {
		if id := c.idFromMetaKey(key); id != "" {
			mu.Lock()
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
			mu.Unlock()
		}
		return nil
	})
	return ids, err
}

// minorDigitsOf turns the digit count Redis stores (meta "digits", the
// member records and the content hash all hold the count itself, as every
// version of this package wrote it) into a MinorDigits value.
func minorDigitsOf(count int) int {
	if count == 0 {
		return gradient.NoMinorDigits
	}
	return count
}
