package cache

import (
	"context"
	"fmt"
	"sort"

	"github.com/tierset/tierset/gradient"
)

// Ladder is a stored promotion's tiers as one version wrote them, for
// operator tooling: what Match reads, tier by tier.
type Ladder struct {
	Promotion string
	Version   string
	// Tiers are in ascending score order, with Gifts filled for the tiers
	// that have them.
	Tiers []TierHit
}

// Ladder reads every tier of a promotion and its gift lists: one round trip,
// two when some tier has gifts. ErrNotFound when absent, ErrCorrupt when a
// member or gift list does not decode or members disagree on the version.
func (c *Cache) Ladder(ctx context.Context, id string) (Ladder, error) {
	if err := gradient.ValidateID(id); err != nil {
		return Ladder{}, invalid("id", "%w", err)
	}
	raws, err := c.client.ZRange(ctx, c.tiersKey(id), 0, -1).Result()
	rts := 1
	defer func() { c.obs.OnRoundTrips(OpInfo, rts) }()
	if err != nil {
		return Ladder{}, fmt.Errorf("cache: ladder %q: %w", id, ctxErr(ctx, err))
	}
	if len(raws) == 0 {
		c.nearAnswered(id, "")
		return Ladder{}, ErrNotFound
	}
	l := Ladder{Promotion: id}
	gifts := false
	for _, raw := range raws {
		d, err := c.decode(id, raw)
		if err != nil {
			return Ladder{}, err
		}
		m := &d.m
		if l.Version == "" {
			l.Version = m.version
		} else if m.version != l.Version {
			return Ladder{}, fmt.Errorf("%w: promotion %q holds versions %s and %s", ErrCorrupt, id, l.Version, m.version)
		}
		if m.kind == kindTier {
			l.Tiers = append(l.Tiers, TierHit{ID: m.tierID, Score: m.score, Threshold: d.threshold, Reward: m.reward, HasGifts: m.hasGifts})
			gifts = gifts || m.hasGifts
		}
	}
	c.nearAnswered(id, l.Version)
	if !gifts {
		return l, nil
	}
	rts++
	lists, err := c.client.HGetAll(ctx, c.giftsKey(id, l.Version)).Result()
	if err != nil {
		return Ladder{}, fmt.Errorf("cache: ladder %q gifts: %w", id, ctxErr(ctx, err))
	}
	for i := range l.Tiers {
		t := &l.Tiers[i]
		if !t.HasGifts {
			continue
		}
		raw, ok := lists[t.ID]
		if !ok {
			return Ladder{}, fmt.Errorf("%w: promotion %q version %s tier %q", ErrGiftsGone, id, l.Version, t.ID)
		}
		if t.Gifts, err = decodeGifts(raw, c.maxBytes); err != nil {
			c.obs.OnDecodeError(id, recordGifts, err)
			return Ladder{}, fmt.Errorf("promotion %q tier %q: %w", id, t.ID, err)
		}
	}
	return l, nil
}

// IDs returns the ID of every promotion stored under the prefix, sorted.
// Like List it reads the promotion index once the prefix is marked (then
// checks each meta key exists, one pipelined EXISTS per 1000), and SCANs
// the keyspace (every master of a Cluster) before; it reads no promotion.
func (c *Cache) IDs(ctx context.Context) ([]string, error) {
	ids, indexed, err := c.listIDs(ctx)
	c.obs.OnRoundTrips(OpList, 1)
	if err == nil && indexed {
		ids, err = c.liveIDs(ctx, ids)
	}
	if err != nil {
		return nil, fmt.Errorf("cache: ids: %w", ctxErr(ctx, err))
	}
	sort.Strings(ids)
	return ids, nil
}

// InfoResult is one promotion's Info, or why it could not be read
// (ErrNotFound, an invalid "id", ErrCorrupt), or what is missing from it
// (ErrDamaged, with the Info that could be read and its Damage).
type InfoResult struct {
	Info
	Err error
}

// Infos reads the Info of each ID, in order, with Info's damage checks,
// in one pipelined round trip plus one when some has gifts; a bad,
// missing or damaged promotion sets its own Err and the others still
// come back. The call's error is for transport and context failures only.
func (c *Cache) Infos(ctx context.Context, ids ...string) ([]InfoResult, error) {
	out := make([]InfoResult, len(ids))
	valid := make([]string, 0, len(ids))
	for i, id := range ids {
		if err := gradient.ValidateID(id); err != nil {
			out[i] = InfoResult{Info: Info{ID: id}, Err: invalid("id", "%w", err)}
			continue
		}
		valid = append(valid, id)
	}
	if len(valid) == 0 {
		return out, nil
	}
	ins, err := c.infos(ctx, valid, OpInfo)
	if err != nil {
		return nil, fmt.Errorf("cache: infos: %w", ctxErr(ctx, err))
	}
	k := 0
	for i := range out {
		if out[i].Err != nil {
			continue
		}
		in, id := ins[k], valid[k]
		k++
		switch {
		case in.err != nil:
			out[i] = InfoResult{Info: Info{ID: id}, Err: in.err}
		case in.absent:
			out[i] = InfoResult{Info: Info{ID: id}, Err: ErrNotFound}
		case in.Damage != "":
			out[i] = InfoResult{Info: in.Info, Err: damaged(id, in.Damage)}
		default:
			out[i] = InfoResult{Info: in.Info}
		}
	}
	return out, nil
}
