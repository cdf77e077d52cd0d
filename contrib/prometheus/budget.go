package prometheus

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tierset/tierset/budget"
)

// BudgetOptions configures a BudgetCollector.
type BudgetOptions struct {
	// Namespace prefixes every metric name. Default "tierset".
	Namespace string
	// ConstLabels are added to every series. Default none.
	ConstLabels prometheus.Labels
	// MaxPromotions caps the distinct promotion label values: the first
	// MaxPromotions promotions seen get their own series, later ones
	// count under OtherPromotion. Default DefaultMaxPromotions.
	MaxPromotions int
}

// BudgetCollector is a prometheus.Collector fed by a budget.Observer
// (Observer): what this process's budgets granted and refused, and the
// holds whose expiry it reported. Its families:
//
//   - tierset_budget_grants_total{budget,promotion}: new holds, per line;
//   - tierset_budget_refusals_total{budget,promotion,cap}: reservations
//     refused by a cap (its Cap.String, or "per cart");
//   - tierset_budget_holds_expired_total{budget}: holds that ended unpaid
//     (Expire's first report of each).
type BudgetCollector struct {
	grants, refusals, expired *prometheus.CounterVec
	max                       int

	mu     sync.Mutex
	promos map[string]bool // promotion label values given their own series
}

var _ prometheus.Collector = (*BudgetCollector)(nil)

// NewBudgetCollector returns a collector; register it, pass its Observer
// as budget.Options.Observer, and Ensure each budget to have its series
// at 0 from the start.
func NewBudgetCollector(o BudgetOptions) *BudgetCollector {
	if o.Namespace == "" {
		o.Namespace = "tierset"
	}
	if o.MaxPromotions <= 0 {
		o.MaxPromotions = DefaultMaxPromotions
	}
	vec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: o.Namespace, Subsystem: "budget",
			Name: name, Help: help, ConstLabels: o.ConstLabels}, append([]string{"budget"}, labels...))
	}
	return &BudgetCollector{
		grants:   vec("grants_total", "New holds this process's reservations made, per promotion (one per line).", "promotion"),
		refusals: vec("refusals_total", "Reservations this process saw refused by a cap, by promotion and cap.", "promotion", "cap"),
		expired:  vec("holds_expired_total", "Holds that ended unpaid, as this process's Expire calls first reported them."),
		max:      o.MaxPromotions,
		promos:   map[string]bool{},
	}
}

// promotion is the label value of p: itself, or OtherPromotion past
// MaxPromotions.
func (c *BudgetCollector) promotion(p string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.promos[p] {
		return p
	}
	if len(c.promos) >= c.max {
		return OtherPromotion
	}
	c.promos[p] = true
	return p
}

// Ensure creates b's series at 0: grants per promotion, refusals per
// promotion and cap (and "per cart" where MaxPerCart is set), expired
// holds; so rate() and alerts see them before the first event.
func (c *BudgetCollector) Ensure(b *budget.Budget) {
	c.expired.WithLabelValues(b.Name())
	for _, id := range b.Promotions() {
		p, _ := b.Promotion(id)
		l := c.promotion(id)
		c.grants.WithLabelValues(b.Name(), l)
		for _, cp := range p.Caps {
			c.refusals.WithLabelValues(b.Name(), l, cp.String())
		}
		if p.MaxPerCart > 0 {
			c.refusals.WithLabelValues(b.Name(), l, "per cart")
		}
	}
}

// Observer returns the budget.Observer that feeds c: pass it as
// budget.Options.Observer.
func (c *BudgetCollector) Observer() budget.Observer {
	return budget.Observer{
		OnGrant: func(b, p string) { c.grants.WithLabelValues(b, c.promotion(p)).Inc() },
		OnRefusal: func(b, p, cp string) {
			c.refusals.WithLabelValues(b, c.promotion(p), cp).Inc()
		},
		OnHoldExpired: func(b string) { c.expired.WithLabelValues(b).Inc() },
	}
}

func (c *BudgetCollector) collectors() parts { return parts{c.grants, c.refusals, c.expired} }

// Describe implements prometheus.Collector.
func (c *BudgetCollector) Describe(ch chan<- *prometheus.Desc) { c.collectors().Describe(ch) }

// Collect implements prometheus.Collector.
func (c *BudgetCollector) Collect(ch chan<- prometheus.Metric) { c.collectors().Collect(ch) }
