package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/matchfmt"
	"github.com/tierset/tierset/rules"
)

// promoPageSize is how many promotions one page lists.
const promoPageSize = 50

type promoRow struct {
	ID, Version, Metric, Kind, Window, State, Err string
	Damage                                        string // Info.Damage: what is missing from Redis
	Tiers, GiftTiers                              int
	Updated                                       time.Time
}

// pageRows reads the page's IDs with Cache.Infos: one round trip (plus
// one when some has gifts), with each promotion's damage on its row.
func pageRows(ctx context.Context, c *cache.Cache, ids []string, now time.Time) ([]promoRow, error) {
	ins, err := c.Infos(ctx, ids...)
	if err != nil {
		return nil, err
	}
	rows := make([]promoRow, len(ids))
	for i, in := range ins {
		if in.Err != nil && !promoErr(in.Err) {
			return nil, in.Err
		}
		rows[i] = infoRow(in.Info, in.Err, now)
	}
	return rows, nil
}

// promoErr reports whether err is about the promotion itself (shown on
// its row) rather than about reaching Redis.
func promoErr(err error) bool {
	for _, e := range []error{cache.ErrNotFound, cache.ErrDamaged, cache.ErrCorrupt, &cache.ValidationError{Field: "id"}} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (s *Console) promotionsPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ids, listedAt, err := s.promotionIDs(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	search := strings.TrimSpace(r.URL.Query().Get("q"))
	if search != "" {
		needle := strings.ToLower(search)
		var hits []string
		for _, id := range ids {
			if strings.Contains(strings.ToLower(id), needle) {
				hits = append(hits, id)
			}
		}
		ids = hits
	}
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	pages := max(1, (len(ids)+promoPageSize-1)/promoPageSize)
	page = min(max(page, 1), pages)
	chunk := ids[min((page-1)*promoPageSize, len(ids)):min(page*promoPageSize, len(ids))]
	c, err := s.cacheFor(0)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rows, err := pageRows(ctx, c, chunk, s.cfg.now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	data := map[string]any{"Rows": rows, "Total": len(ids), "Search": search, "Page": page, "Pages": pages,
		"ListedAt": listedAt, "Prefix": s.cfg.cachePrefix}
	if page > 1 {
		data["Prev"] = page - 1
	}
	if page < pages {
		data["Next"] = page + 1
	}
	s.render(w, r, "promotions.html", "Promotions", data)
}

// infoRow is one promotion as Cache.Info read it. A damaged one keeps
// what could be read beside its Damage; another error leaves only the ID.
func infoRow(in cache.Info, err error, now time.Time) promoRow {
	row := promoRow{ID: in.ID}
	if err != nil && !errors.Is(err, cache.ErrDamaged) {
		row.Err, row.State = err.Error(), "damaged"
		if errors.Is(err, cache.ErrNotFound) {
			row.State = "gone" // deleted since the listing
		}
		return row
	}
	row.Version, row.Metric, row.Kind = in.Version, rules.MetricName(in.Metric), rules.KindName(in.Kind)
	row.Window, row.Tiers, row.GiftTiers, row.Updated = matchfmt.Window(in), in.Tiers, in.GiftTiers, in.Updated
	switch {
	case in.Damage != "":
		row.State, row.Damage = "damaged", in.Damage
	case !in.Start.IsZero() && now.Before(in.Start):
		row.State = "scheduled"
	case !in.End.IsZero() && !now.Before(in.End):
		row.State = "ended"
	default:
		row.State = "active"
	}
	return row
}

type ladderRow struct {
	ID, Threshold, Reward string
	Gifts                 []string
}

// simView is the match simulator's answer.
type simView struct {
	Value, Base, Rounding string
	Asked                 bool
	Matched               string // the value matched, with a note when floored
	Err                   string
	Tier, Reward          string
	Discount              string
	Gifts                 []string
	Next                  string
	Version               string
}

func (s *Console) promotionPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	qv := r.URL.Query()
	id := qv.Get("id")
	c, err := s.cacheFor(0)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	in, err := c.Info(ctx, id)
	if err != nil && !errors.Is(err, cache.ErrDamaged) {
		s.fail(w, r, fmt.Errorf("promotion %q: %w", id, err))
		return
	}
	// A damaged promotion comes with what could be read: show it under
	// the damage rather than an error page, so the operator sees what a
	// Refresh has to repair.
	data := map[string]any{"Info": infoRow(in, err, s.cfg.now()), "Raw": in}
	if lad, err := c.Ladder(ctx, id); err != nil {
		data["LadderErr"] = err.Error()
	} else {
		rows := make([]ladderRow, len(lad.Tiers))
		for i, t := range lad.Tiers {
			rows[i] = ladderRow{ID: t.ID, Threshold: matchfmt.ShowValue(in, t.Threshold), Reward: matchfmt.DescribeReward(t.Reward), Gifts: giftList(t.Gifts)}
		}
		data["Ladder"], data["Chart"] = rows, stepChart(in, lad.Tiers)
	}
	sim := simView{Value: qv.Get("value"), Base: qv.Get("base"), Rounding: qv.Get("rounding")}
	if sim.Rounding == "" {
		sim.Rounding = "half-up"
	}
	if sim.Value != "" {
		s.simulate(r, in, &sim)
	}
	data["Sim"], data["Roundings"] = sim, []string{"down", "half-up", "half-even", "up"}
	s.render(w, r, "promotion.html", "Promotion "+id, data)
}

// simulate matches like a cart: the Cache for the promotion's minor
// digits, Next and Gifts in the same call.
func (s *Console) simulate(r *http.Request, in cache.Info, sim *simView) {
	sim.Asked = true
	q, err := matchfmt.Parse(sim.Value, sim.Base, sim.Rounding, "")
	if err != nil {
		sim.Err = strings.ReplaceAll(err.Error(), "-value", "value")
		return
	}
	c, err := s.cacheFor(in.MinorDigits)
	if err != nil {
		sim.Err = err.Error()
		return
	}
	res, err := c.Match(r.Context(), cache.Query{Promotion: in.ID, Metric: in.Metric, Value: q.Value}, cache.MatchOptions{Next: true, Gifts: true})
	if err != nil && res.Err == nil {
		sim.Err = err.Error()
		return
	}
	sim.Version = res.Version
	sim.Matched = matchfmt.ShowMatched(in, q.Value)
	switch {
	case errors.Is(res.Err, cache.ErrNoTier):
		sim.Tier = "none reached"
	case res.Err != nil:
		sim.Err = res.Err.Error()
		return
	default:
		t := res.Tier
		sim.Tier = fmt.Sprintf("%s (threshold %s)", t.ID, matchfmt.ShowValue(in, t.Threshold))
		sim.Reward, sim.Discount, sim.Gifts = matchfmt.DescribeReward(t.Reward), matchfmt.Discount(in, q, t.Reward), giftList(t.Gifts)
	}
	if n := res.Next; n != nil {
		sim.Next = fmt.Sprintf("%s at %s: %s more for %s", n.ID, matchfmt.ShowValue(in, n.Threshold), matchfmt.ShowValue(in, res.Shortfall), matchfmt.DescribeReward(n.Reward))
	} else {
		sim.Next = "none (top tier)"
	}
}

func giftList(gs []gradient.Gift) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = fmt.Sprintf("%d × %s", g.Qty, g.SKU)
		if g.Name != "" {
			out[i] += " (" + g.Name + ")"
		}
	}
	return out
}

// stepSVG is the ladder as a step chart: x the matched value, y the
// percentage off when every tier is percent-off, else the tier's rank.
type stepSVG struct {
	Width, Height int
	Path          string
	Dots          []stepDot
	YLabel        string
}

type stepDot struct {
	X, Y      int
	Label     string
	Tip       string
	ShowLabel bool
}

func stepChart(in cache.Info, tiers []cache.TierHit) stepSVG {
	ch := stepSVG{Width: 640, Height: 200, YLabel: "tier"}
	if len(tiers) == 0 {
		return ch
	}
	percent := true
	for _, t := range tiers {
		percent = percent && t.Reward.Kind == gradient.PercentOff
	}
	ys := make([]float64, len(tiers))
	var top float64
	for i, t := range tiers {
		ys[i] = float64(i + 1)
		if percent {
			ys[i], _ = t.Reward.Percent.Float64()
		}
		top = max(top, ys[i])
	}
	if percent {
		ch.YLabel = "% off"
	}
	xmax, _ := tiers[len(tiers)-1].Threshold.Mul(decimal.NewFromFloat(1.15)).Float64()
	xmax = max(xmax, 1)
	const left, bottom, pad = 10, 30, 10
	plotW, plotH := float64(ch.Width-left-pad), float64(ch.Height-bottom-pad)
	px := func(v float64) int { return left + int(v/xmax*plotW) }
	py := func(v float64) int { return pad + int(plotH-v/max(top, 1)*plotH) }
	var b strings.Builder
	fmt.Fprintf(&b, "M%d %d", px(0), py(0))
	every := max(1, len(tiers)/10)
	for i, t := range tiers {
		x, _ := t.Threshold.Float64()
		fmt.Fprintf(&b, " H%d V%d", px(x), py(ys[i]))
		ch.Dots = append(ch.Dots, stepDot{X: px(x), Y: py(ys[i]), Label: matchfmt.ShowValue(in, t.Threshold),
			Tip: fmt.Sprintf("%s from %s: %s", t.ID, matchfmt.ShowValue(in, t.Threshold), matchfmt.DescribeReward(t.Reward)), ShowLabel: i%every == 0})
	}
	fmt.Fprintf(&b, " H%d", px(xmax))
	ch.Path = b.String()
	return ch
}
