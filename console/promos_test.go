package console

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/gradient"
)

var promoRowRe = regexp.MustCompile(`(?s)<tr data-id="([^"]*)" data-state="([a-z]+)">(.*?)</tr>`)

// promoRows loads the promotions page and returns each row's state and
// inner HTML by promotion ID (HTML-unescaped).
func promoRows(t *testing.T, c *http.Client, u string) map[string][2]string {
	t.Helper()
	code, body := get(t, c, u+"/promotions")
	if code != http.StatusOK {
		t.Fatalf("GET /promotions: %d\n%s", code, body)
	}
	out := map[string][2]string{}
	for _, m := range promoRowRe.FindAllStringSubmatch(body, -1) {
		out[html.UnescapeString(m[1])] = [2]string{m[2], m[3]}
	}
	return out
}

// TestWebShowsDamage: a promotion with a key deleted under it is listed
// as damaged, with Info's Damage, and its page shows what could be read
// under a damage banner: a 200, never the 502 error page.
func TestWebShowsDamage(t *testing.T) {
	eachConsole(t, true, func(t *testing.T, f *consoleFixture) {
		ctx := t.Context()
		metaGone := gradient.Promotion{ID: "meta-gone", Metric: gradient.Quantity, Tiers: []gradient.Tier{
			{ID: "2+", Threshold: decimal.NewFromInt(2), Reward: gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(5)}}}}
		if _, err := f.c.Refresh(ctx, metaGone); err != nil {
			t.Fatal(err)
		}
		c := browser(t)
		for id, row := range promoRows(t, c, f.url) {
			if row[0] != "active" {
				t.Fatalf("before any damage %q is %q", id, row[0])
			}
		}
		gifted, err := f.c.Info(ctx, xssName)
		if err != nil {
			t.Fatal(err)
		}
		// The cache package exports no key names; these follow its layout
		// (cache/keys.go), as the other suites that damage promotions do.
		key := func(id, suffix string) string { return f.b.Prefix + ":{p:" + id + "}:" + suffix }
		tests := []struct {
			id, del, damage string
			listed          bool // the listing finds promotions by their meta key
		}{
			{"spend-more", key("spend-more", "tiers"), "tiers key missing", true},
			{xssName, key(xssName, "gifts:"+gifted.Version), "gift list hash of the current version missing", true},
			{"meta-gone", key("meta-gone", "meta"), "meta hash missing, tiers key holds 3 members", false},
		}
		for _, tc := range tests {
			if n, err := f.b.Client.Del(ctx, tc.del).Result(); err != nil || n != 1 {
				t.Fatalf("DEL %s: %d, %v", tc.del, n, err)
			}
		}
		rows := promoRows(t, c, f.url)
		for _, tc := range tests {
			row, ok := rows[tc.id]
			switch {
			case ok != tc.listed:
				t.Errorf("%s: listed %v, want %v", tc.id, ok, tc.listed)
			case ok && (row[0] != "damaged" || !strings.Contains(row[1], tc.damage)):
				t.Errorf("%s listed as %q, want damaged with %q:\n%s", tc.id, row[0], tc.damage, row[1])
			}
			code, body := get(t, c, f.url+"/promotion?id="+url.QueryEscape(tc.id))
			if code != http.StatusOK || !strings.Contains(body, `id="promo-damage"`) || !strings.Contains(body, tc.damage) ||
				!strings.Contains(body, `id="promo-state">damaged<`) {
				t.Errorf("%s page: status %d, want 200 with the damage banner %q:\n%s", tc.id, code, tc.damage, body)
			}
			if tc.listed && !strings.Contains(body, `<code id="promo-version">`) {
				t.Errorf("%s page does not show its version", tc.id)
			}
			if strings.Contains(body, `id="error"`) || strings.Contains(body, "<script") {
				t.Errorf("%s page is an error page or unescaped", tc.id)
			}
		}
		if _, body := get(t, c, f.url+"/promotion?id=spend-more"); !strings.Contains(body, `id="ladder-error"`) {
			t.Errorf("the ladder of a promotion without tiers key shows no error")
		}
		if code, _ := get(t, c, f.url+"/promotion?id=never-stored"); code != http.StatusNotFound {
			t.Errorf("a promotion never stored: status %d, want 404", code)
		}
	})
}
