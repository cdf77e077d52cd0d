package prometheus_test

import (
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/cache"
	tsprom "github.com/tierset/tierset/contrib/prometheus"
	"github.com/tierset/tierset/delay"
)

var (
	seriesRe = regexp.MustCompile(`\btierset_[a-z0-9_]+`)
	labelRe  = regexp.MustCompile(`\b(?:by|without) \(([^)]*)\)`)
)

// TestGrafanaDashboard loads contrib/grafana/tierset-dashboard.json as
// Grafana would read it (panels, targets, templating), checks that each
// query is well formed (balanced brackets and quotes, a range on every
// rate) and that every series it names, and every label it groups by,
// is one the collectors export.
func TestGrafanaDashboard(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../grafana/tierset-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	if dash.Title == "" || dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatalf("dashboard without title, uid or panels")
	}
	names, labels := exported(t)
	var exprs []string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok && strings.Contains(q, "tierset_") {
			exprs = append(exprs, q)
		}
	}
	checkExprs(t, exprs, names, labels)
	for _, e := range exprs {
		for _, r := range rangeRe.FindAllStringSubmatch(e, -1) {
			if r[1] != "$__rate_interval" {
				t.Errorf("query %q: range [%s], want [$__rate_interval] (a fixed window is wrong at other scrape intervals)", e, r[1])
			}
		}
	}
}

// rangeRe finds the range of a range vector.
var rangeRe = regexp.MustCompile(`\[([^\]]+)\]`)

// checkExprs checks that each query is well formed and that every series
// it names, and every label it groups by, is one the collectors export.
func checkExprs(t *testing.T, exprs []string, names map[string]string, labels map[string]map[string]bool) {
	t.Helper()
	for _, e := range exprs {
		if err := wellFormed(e); err != nil {
			t.Errorf("query %q: %v", e, err)
		}
		have := map[string]bool{} // the labels of the series e names
		for _, n := range seriesRe.FindAllString(e, -1) {
			base := n
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(n, suf); ok && names[b] == "histogram" {
					base = b
				}
			}
			if names[base] == "" {
				t.Errorf("query %q names %s, which no collector exports", e, n)
			}
			for l := range labels[base] {
				have[l] = true
			}
		}
		for _, m := range labelRe.FindAllStringSubmatch(e, -1) {
			for _, l := range strings.Split(m[1], ",") {
				if l = strings.TrimSpace(l); l != "le" && !have[l] {
					t.Errorf("query %q groups by %q, a label none of its series has", e, l)
				}
			}
		}
	}
}

// exported gathers every collector after a little traffic (so each
// histogram vector has a series) and returns the family names with their
// type and label names.
func exported(t *testing.T) (map[string]string, map[string]map[string]bool) {
	t.Helper()
	names := map[string]string{}
	labels := map[string]map[string]bool{}
	for _, mf := range gatherAll(t) {
		names[mf.GetName()] = strings.ToLower(mf.GetType().String())
		labels[mf.GetName()] = map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[mf.GetName()][l.GetName()] = true
			}
		}
	}
	return names, labels
}

// gatherAll registers every collector on a miniredis, makes a little
// traffic (so each histogram vector has a series) and gathers them.
func gatherAll(t *testing.T) []*dto.MetricFamily {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	cc := tsprom.NewCacheCollector(tsprom.CacheOptions{})
	dc := tsprom.NewDelayCollector(tsprom.DelayOptions{Queues: []string{"orders"}})
	c, err := cache.New(rdb, cache.Options{Observer: cc})
	if err != nil {
		t.Fatal(err)
	}
	q, err := delay.New(rdb, "orders", delay.Options{Observer: dc.Observer()})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Match(t.Context(), cache.QuantityQuery("none", 1), cache.MatchOptions{})
	_, _ = c.Refresh(t.Context())
	cc.OnLoad("x", cache.LoadLoaded, time.Millisecond)
	reg := prometheus.NewRegistry()
	pc := tsprom.NewPeriodicCollector(tsprom.PeriodicOptions{Jobs: []tsprom.PeriodicJob{{Queue: "orders", Name: "report"}}})
	reg.MustRegister(cc, dc, tsprom.NewQueueCollector(tsprom.QueueOptions{}, q), pc)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// wellFormed checks what a PromQL parser would refuse first: unbalanced
// (), {}, [] or quotes, and a rate or increase without a range.
func wellFormed(e string) error {
	var stack []rune
	inQuote := false
	for _, r := range e {
		if r == '"' {
			inQuote = !inQuote
			continue
		}
		if inQuote {
			continue
		}
		switch r {
		case '(', '{', '[':
			stack = append(stack, r)
		case ')', '}', ']':
			open := map[rune]rune{')': '(', '}': '{', ']': '['}[r]
			if len(stack) == 0 || stack[len(stack)-1] != open {
				return errors.New("unbalanced " + string(r))
			}
			stack = stack[:len(stack)-1]
		}
	}
	if inQuote || len(stack) > 0 {
		return errors.New("unclosed quote or bracket")
	}
	for _, fn := range []string{"rate(", "increase("} {
		if i := strings.Index(e, fn); i >= 0 && !strings.Contains(e[i:], "[") {
			return errors.New(fn + " without a range")
		}
	}
	return nil
}
