package main

import (
	"bytes"
	"context"
	"fmt"
	"sort"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/examples"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/text"
	"github.com/tierset/tierset/rules"
	"github.com/tierset/tierset/warm"
)

func cmdDemo(ctx context.Context, args []string, e *env) error {
	fs := newFlags("demo", "tierset demo [-rules FILE] [-at TIME] [-unit-price AMOUNT] [-rounding MODE]")
	rulesPath := fs.String("rules", "", "rules `FILE` to warm into the embedded Redis (default: the built-in "+examples.RulesName+")")
	at := fs.String("at", "", "match as of this RFC 3339 `time` (default now)")
	unitPrice := fs.String("unit-price", "19.90", "the item `price` used as the discount base of quantity promotions")
	rounding := fs.String("rounding", "half-up", "discount rounding: down, half-up, half-even or up")
	if err := fs.parse(args, e); err != nil {
		return err
	}
	q, err := parseMatchArgs("0", "", *rounding, *at)
	if err != nil {
		return err
	}
	price, err := parseAmountArg("-unit-price", *unitPrice, "19.90")
	if err != nil {
		return err
	}
	promos, name, err := loadRules(*rulesPath)
	if err != nil {
		return err
	}
	m, err := startEmbedded()
	if err != nil {
		return err
	}
	defer m.close()
	be := m
	c, err := cache.New(be.client, cache.Options{})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "== warm %s into an embedded Redis\n", text.Escape(name))
	if _, err := warmAndReport(ctx, c, promos, warm.Options{}, newProgress(e.stdout, false, ""), e.stdout); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "== warm it again: the content hashes match, nothing is written")
	if _, err := warmAndReport(ctx, c, promos, warm.Options{}, newProgress(e.stdout, false, ""), e.stdout); err != nil {
		return err
	}
	for _, p := range promos {
		for _, v := range demoValues(&p) {
			mq := q
			mq.Value = v
			if p.Metric == gradient.Quantity {
				b := price.Mul(v)
				mq.Base = &b
			}
			fmt.Fprintf(e.stdout, "== tierset match -promo %s -value %s", p.ID, v)
			if mq.Base != nil {
				fmt.Fprintf(e.stdout, " -base %s", mq.Base.StringFixed(int32(gradient.Digits(p.MinorDigits))))
			}
			fmt.Fprintln(e.stdout)
			if err := matchOne(ctx, be, cache.DefaultPrefix, p.ID, mq, e.stdout); err != nil {
				fmt.Fprintf(e.stdout, "  %s\n", text.Escape(err.Error()))
			}
		}
	}
	return nil
}

// loadRules reads path, or the built-in example rules when path is empty.
func loadRules(path string) ([]gradient.Promotion, string, error) {
	if path == "" {
		ps, err := rules.Parse(bytes.NewReader(examples.Rules), examples.RulesName, rules.Options{})
		return ps, examples.RulesName, err
	}
	ps, err := rules.ParseFile(path, rules.Options{})
	return ps, path, err
}

func startEmbedded() (*backend, error) {
	return connect(context.Background(), "", &env{stderr: discard{}})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// demoValues picks cart values that show a promotion's behaviour: just
// below the lowest tier, between each pair of tiers, and well above the
// top one.
func demoValues(p *gradient.Promotion) []decimal.Decimal {
	var ts []decimal.Decimal
	for i := range p.Tiers {
		t := p.Tiers[i].Threshold
		if p.Kind != gradient.Threshold {
			t = p.Tiers[i].MatchValue
		}
		ts = append(ts, t)
	}
	sort.Slice(ts, func(a, b int) bool { return ts[a].LessThan(ts[b]) })
	digits := int32(gradient.Digits(p.MinorDigits))
	if p.Metric == gradient.Quantity {
		digits = 0
	}
	unit := decimal.New(1, -digits)
	var out []decimal.Decimal
	if below := ts[0].Sub(unit); below.Sign() > 0 {
		out = append(out, below)
	}
	for i := 0; i+1 < len(ts) && len(out) < 3; i++ {
		out = append(out, ts[i].Add(ts[i+1]).Div(decimal.NewFromInt(2)).RoundFloor(digits))
	}
	return append(out, ts[len(ts)-1].Mul(decimal.RequireFromString("2.5")).RoundFloor(digits))
}
