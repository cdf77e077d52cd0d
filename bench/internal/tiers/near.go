package tiers

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/internal/measure"
)

// The near-cache impls: the library's Match and MatchCart through a Cache
// with Options.NearCache, on a client of its own.
const (
	implNear     = "near"
	implNearCart = "nearcart"
)

// The near floors, on p50 latency: a near op takes a few hundred ns, so
// its ops/s over a round is set by how long the scheduler of a loaded
// machine keeps the process off its cores, not by the code; the median op
// is not. The cart floor is judged with the most clients measured, as the
// range floors are: one client's raw pipeline p50 is bimodal on loopback,
// and its fast mode is no cart service's round trip.
const (
	floorNearVsRaw       = 30.0 // robust, every tier count and client count
	floorNearCartVsRaw   = 20.0 // robust, the most clients measured
	floorNearP50Flatness = 2.0  // robust
)

// nearReadyTimeout bounds the wait for tracking and the first near hit.
const nearReadyTimeout = 10 * time.Second

// nearSkipped says why a backend gets no near rows ("" when it does).
func nearSkipped(backend string) string {
	if backend == "miniredis" {
		return "miniredis has no CLIENT TRACKING, which keeps the near cache true"
	}
	return ""
}

// newNear opens a second client of rc's server (the near cache's tracking
// must not share the timed impls' pool) and a near cache on it.
func newNear(rc redis.UniversalClient, prefix string) (*cache.Cache, func(), error) {
	nc, err := measure.ClientLike(rc, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("bench: near cache: %w", err)
	}
	c, err := cache.New(nc, cache.Options{Prefix: prefix, MinorDigits: minorDigits, NearCache: &cache.NearCacheOptions{}})
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("cache.New with NearCache: %w", err)
	}
	return c, func() { c.Close(); nc.Close() }, nil
}

// nearReady reads every promotion of w through the near cache until
// tracking is established and a whole cart is answered from memory, so
// the timed near rows start warm. It fails after nearReadyTimeout.
func (t target) nearReady(ctx context.Context, w *workload) error {
	ctx, cancel := context.WithTimeout(ctx, nearReadyTimeout)
	defer cancel()
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for {
		before := t.near.NearStats()
		if _, err := matchCart(ctx, t.near, w.cartQs[0]); err != nil && ctx.Err() == nil {
			return fmt.Errorf("bench: near warm-up read: %w", err)
		}
		after := t.near.NearStats()
		if after.Tracking && after.Hits-before.Hits >= int64(len(w.promos)) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bench: near cache at tiers=%d not serving from memory within %s (tracking %v, %d hits, %d misses, %d held): %w",
				w.tiers, nearReadyTimeout, after.Tracking, after.Hits, after.Misses, after.Promotions, ctx.Err())
		case <-poll.C:
		}
	}
}

// nearHits is the near cache's hit counter, for the per-round check that
// a near row's lookups were all answered from memory.
func (t target) nearHits() int64 { return t.near.NearStats().Hits }

// nearImpls are the near rows over w: the same lookups as range and cart.
func (t target) nearImpls(w *workload) []impl {
	if t.near == nil {
		return nil
	}
	n, nc := len(w.single), len(w.carts)
	return []impl{
		{name: implNear, tiers: w.tiers, lines: 1, hits: t.nearHits, newOp: func() func(context.Context, int) error {
			return func(ctx context.Context, i int) error {
				h, err := matchRange(ctx, t.near, w.single[i%n].q)
				if err == nil && h == nil {
					err = errNoHit
				}
				return err
			}
		}},
		{name: implNearCart, tiers: w.tiers, lines: len(w.promos), hits: t.nearHits, newOp: func() func(context.Context, int) error {
			return func(ctx context.Context, i int) error {
				return cartHits(matchCart(ctx, t.near, w.cartQs[i%nc]))
			}
		}},
	}
}

// cartHits is nil when every line of a cart found a tier.
func cartHits(rs []cache.Result, err error) error {
	if err != nil {
		return err
	}
	for k := range rs {
		if rs[k].Err != nil {
			return rs[k].Err
		}
		if rs[k].Tier == nil {
			return errNoHit
		}
	}
	return nil
}

// checkServed records on s whether its timed lookups were all near hits.
func (s *stats) checkServed() {
	if s.hitsCounted && s.hits < s.Ops*int64(s.Lines) {
		s.invalid = fmt.Sprintf("%v: %d near hits for %d ops × %d lines", errNearMissed, s.hits, s.Ops, s.Lines)
	}
}

// NearFloors adds the near-cache floors of r to t: that every near row was
// answered from memory (judged wherever near rows ran, timing or not),
// and its speed against raw go-redis and its flatness, judged where timing
// is (judged, else why).
func (r *Result) NearFloors(t *measure.Floors, judged bool, why string) {
	var rows, bad int
	note := ""
	for _, s := range r.Rows {
		if !s.hitsCounted {
			continue
		}
		rows++
		if s.invalid != "" {
			bad++
			if note == "" {
				note = fmt.Sprintf("%s tiers=%d conc=%d: %s", s.Impl, s.Tiers, s.Concurrency, s.invalid)
			}
		}
	}
	if r.NearSkipped != "" {
		judged, why = false, r.NearSkipped
	}
	served := measure.Floor{Subject: "tiers", Name: "near rows answered from memory (near hits ≥ ops × lines)", Want: "every row", Kind: measure.Robust}
	switch {
	case r.NearSkipped != "":
		t.JudgeIf(false, r.NearSkipped, served, false)
	case rows == 0:
		t.Skip(served, "no near rows")
	default:
		served.Value, served.Note = fmt.Sprintf("%d of %d rows", rows-bad, rows), note
		t.Judge(served, bad == 0)
	}
	add, skip := tierJudges(t, judged, why)
	valid := func(f *measure.Floor) bool {
		if bad > 0 {
			f.Note += "; near rows invalid"
		}
		return bad == 0
	}
	speedupFloor := func(name, near, raw string, floor float64, conc int) {
		f := measure.Floor{Name: name, Want: fmt.Sprintf("≥ %.0f×", floor), Kind: measure.Robust}
		w, where := r.worstSpeedup(near, raw, conc)
		if math.IsInf(w, 1) {
			skip(f, "no "+near+"/"+raw+" rows")
			return
		}
		ops, _ := r.worstRatio(near, raw)
		f.Value, f.Note = fmtRatio(w), where+"; ops/s ratio "+fmtRatio(ops)
		add(f, valid(&f) && w >= floor)
	}
	speedupFloor("near Match vs raw go-redis, p50 speed-up (worst case)", implNear, implRaw, floorNearVsRaw, 0)
	conc := r.maxConcurrency()
	speedupFloor(fmt.Sprintf("near MatchCart of %d lines vs raw pipeline, p50 speed-up (worst tier count), %d clients", r.Lines, conc),
		implNearCart, implRawCart, floorNearCartVsRaw, conc)
	f := measure.Floor{Name: "near p50 flatness, 3000 tiers / 3 tiers, 1 client", Want: fmt.Sprintf("≤ %.2f×", floorNearP50Flatness), Kind: measure.Robust}
	if x := r.p50Ratio(implNear, 3000, 3, 1); math.IsNaN(x) {
		skip(f, "needs -tiers with 3 and 3000 and -concurrency with 1")
	} else {
		f.Value = fmt.Sprintf("%.3f×", x)
		f.Note = fmt.Sprintf("p50 %s vs %s", fmtDur(r.find(implNear, 3000, 1).Quantile(0.5)), fmtDur(r.find(implNear, 3, 1).Quantile(0.5)))
		add(f, valid(&f) && x <= floorNearP50Flatness)
	}
}

// worstSpeedup is the lowest p50(slow)/p50(fast) over every measured tier
// count, at concurrency only (0: every concurrency), and where it was;
// +Inf when no pair was measured.
func (r *Result) worstSpeedup(fast, slow string, only int) (float64, string) {
	w, where := math.Inf(1), ""
	for _, conc := range r.concurrencies() {
		if only != 0 && conc != only {
			continue
		}
		for _, tiers := range r.tierCounts() {
			f, s := r.find(fast, tiers, conc), r.find(slow, tiers, conc)
			if f == nil || s == nil || f.Quantile(0.5) <= 0 {
				continue
			}
			if x := float64(s.Quantile(0.5)) / float64(f.Quantile(0.5)); x < w {
				w, where = x, fmt.Sprintf("at tiers=%d conc=%d (p50 %s vs %s)", tiers, conc, fmtDur(f.Quantile(0.5)), fmtDur(s.Quantile(0.5)))
			}
		}
	}
	return w, where
}
