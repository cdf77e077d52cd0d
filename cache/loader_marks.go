package cache

import (
	"fmt"
	"math"
	"time"
)

// Values of the :absent mark: the source does not know the ID, or it
// returned a promotion whose End + Grace has passed.
const (
	markUnknown = "1"
	markEnded   = "ended"
)

// mark is a remembered miss: until when (UnixNano), and whether the
// promotion ended rather than being unknown.
type mark struct {
	until int64
	ended bool
}

// remembered reports whether id is remembered as unknown to the source
// or ended, and which.
func (rt *readThrough) remembered(id string) (known, ended bool) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	m, ok := rt.misses[id]
	if ok && time.Now().UnixNano() >= m.until {
		delete(rt.misses, id)
		return false, false
	}
	return ok, m.ended
}

func (rt *readThrough) remember(id string, ttl time.Duration, ended bool) {
	ttl = min(ttl, rt.trust)
	now := time.Now().UnixNano()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	makeRoom(rt.misses, rt.opt.MaxMisses, now, func(m mark) int64 { return m.until })
	rt.misses[id] = mark{until: until(now, ttl), ended: ended}
}

// makeRoom frees room in m, when it holds limit entries, for one more:
// the expired first (until gives an entry's expiry, UnixNano), then
// arbitrary ones, down to seven eighths of limit. Freeing an eighth in one
// pass keeps a flood of new IDs at O(1) per entry amortised, not a scan
// under rt.mu each; an entry dropped early costs one more load, never a
// wrong answer.
func makeRoom[V any](m map[string]V, limit int, now int64, until func(V) int64) {
	if len(m) < limit {
		return
	}
	keep := limit - max(1, limit/8)
	for k, v := range m {
		if now >= until(v) {
			delete(m, k)
		}
	}
	for k := range m {
		if len(m) <= keep {
			break
		}
		delete(m, k) // map order: an arbitrary one
	}
}

// forgetAll drops every remembered miss (tracking was lost: a warm
// elsewhere may have gone unseen).
func (rt *readThrough) forgetAll() {
	rt.mu.Lock()
	clear(rt.misses)
	rt.mu.Unlock()
}

// flying reports whether a load of id is under way in this process (tests).
func (rt *readThrough) flying(id string) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.flights[id] != nil
}

// forget drops id's remembered miss and failure (a refresh wrote it).
func (rt *readThrough) forget(id string) {
	rt.mu.Lock()
	delete(rt.misses, id)
	delete(rt.failures, id)
	rt.mu.Unlock()
}

// fail remembers a failed load of id for FailTTL; rt.mu is held.
func (rt *readThrough) fail(id string, err error) {
	now := time.Now().UnixNano()
	makeRoom(rt.failures, rt.opt.MaxMisses, now, func(f failure) int64 { return f.until })
	rt.failures[id] = failure{until: until(now, rt.opt.FailTTL), err: err}
}

// failed returns id's remembered load failure, or nil.
func (rt *readThrough) failed(id string) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	f, ok := rt.failures[id]
	switch {
	case !ok:
		return nil
	case time.Now().UnixNano() >= f.until:
		delete(rt.failures, id)
		return nil
	}
	return fmt.Errorf("%w (a load failed under %v ago; retried after Load.FailTTL)", f.err, rt.opt.FailTTL)
}

// until is now+ttl (UnixNano), saturated: a TTL as long as a
// time.Duration can say would otherwise wrap into the past and never be
// remembered at all.
func until(now int64, ttl time.Duration) int64 {
	if int64(ttl) > math.MaxInt64-now {
		return math.MaxInt64
	}
	return now + int64(ttl)
}
