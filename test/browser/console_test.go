package browser

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/delaytest"
)

type kv struct {
	K string `json:"k"`
	V string `json:"v"`
}

// TestBrowserConsole drives every page of "tierset web" in headless
// Chromium against real Redis and checks the DOM against the library.
func TestBrowserConsole(t *testing.T) {
	f := seed(t)
	ctx := newBrowser(t)
	base := startConsole(t, f)
	dir := shots(t)

	t.Run("queues page equals Stats", func(t *testing.T) {
		stats := []string{"ready", "pending", "inflight", "dead", "delivered", "acked", "dead-lettered", "due-soon", "first-due", "oldest-lease"}
		library := func() []string {
			st, err := f.q.Stats(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			ov, err := queueOverview(t.Context(), f.q)
			if err != nil {
				t.Fatal(err)
			}
			if len(ov.Due) == 0 || len(ov.InFlight) == 0 {
				t.Fatalf("List shows no due or no leased task: %+v", ov)
			}
			v := []int64{st.Ready, st.Pending, st.InFlight, st.Dead, st.Delivered, st.Acked, st.DeadLettered, ov.DueSoon}
			out := make([]string, 0, len(stats))
			for _, n := range v {
				out = append(out, strconv.FormatInt(n, 10))
			}
			return append(out, ov.Due[0].Key, ov.InFlight[0].Key)
		}
		var page []string
		var bars int
		want := steady(t, library, func() {
			do(t, ctx, "load /queues", chromedp.Navigate(base+"/queues"), chromedp.WaitVisible(css(`[data-queue="orders"]`)))
			shown := get(t, ctx, "read stats", chromedp.Evaluate[[]kv](
				`Array.from(document.querySelectorAll('[data-queue="orders"] [data-stat]')).map(e => ({k: e.dataset.stat, v: e.textContent.trim()}))`))
			got := map[string]string{}
			for _, s := range shown {
				got[s.K] = s.V
			}
			got["first-due"] = get(t, ctx, "first due", chromedp.Text(css(`[data-queue="orders"] table.due tr:nth-child(2) td:nth-child(2)`)))
			got["oldest-lease"] = get(t, ctx, "oldest lease", chromedp.Text(css(`[data-queue="orders"] table.inflight tr:nth-child(2) td:nth-child(2)`)))
			page = page[:0]
			for _, k := range stats {
				page = append(page, got[k])
			}
			bars = get(t, ctx, "count bars", chromedp.Evaluate[int](`document.querySelectorAll('[data-queue="orders"] svg.hist rect').length`))
		})
		for i, k := range stats {
			if page[i] != want[i] {
				t.Errorf("%s: page %q, library %q", k, page[i], want[i])
			}
		}
		if bars < 12 {
			t.Errorf("lateness chart has %d bars", bars)
		}
		screenshot(t, ctx, dir, "queues")
	})

	t.Run("dead letters escaped and counted", func(t *testing.T) {
		do(t, ctx, "load /dead", chromedp.Navigate(base+"/dead?queue=orders"), chromedp.WaitVisible(css(`#dead-table`)))
		total := get(t, ctx, "total", chromedp.AttributeValue(css(`#dead-total`), "data-total"))
		errText := get(t, ctx, "error cell", chromedp.TextContent(css(`tr[data-id="`+f.dead[0]+`"] td.error`)))
		injected := get(t, ctx, "count script and img", chromedp.Evaluate[int](`document.querySelectorAll('main script, main img').length`))
		if total.Value != strconv.Itoa(len(f.dead)) {
			t.Errorf("dead total on the page %q, want %d", total.Value, len(f.dead))
		}
		if errText != xssError || injected != 0 {
			t.Errorf("the error shows as %q with %d script/img elements; want the text %q and none", errText, injected, xssError)
		}
		// Newest first: List's dead order (oldest first) reversed.
		rows := get(t, ctx, "dead rows", chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#dead-table tr[data-id]')).map(r => r.dataset.id)`))
		order := get(t, ctx, "order", chromedp.AttributeValue(css(`#dead-total`), "data-order"))
		listed := deadOrder(t, f.q)
		slices.Reverse(listed)
		if order.Value != "newest" || !slices.Equal(rows, listed) {
			t.Errorf("dead rows %v (order %q); want List reversed, %v", rows, order.Value, listed)
		}
		screenshot(t, ctx, dir, "dead")
	})

	t.Run("find a key's tasks", func(t *testing.T) {
		do(t, ctx, "lookup", chromedp.Navigate(base+"/dead?queue=orders"), chromedp.WaitVisible(css(`#lookup-key`)),
			chromedp.SendKeys(css(`#lookup-key`), "order-000"), chromedp.Click(css(`#lookup-submit`)),
			chromedp.WaitVisible(css(`#lookup-table`)))
		rows := get(t, ctx, "lookup rows", chromedp.Evaluate[[][]string](
			`Array.from(document.querySelectorAll('#lookup-table tr[data-id]')).map(r => [r.dataset.id, r.children[2].textContent, r.children[5].textContent])`))
		tasks, err := tasksOf(t.Context(), f.q, "order-000")
		if err != nil || len(tasks) != 1 || len(rows) != 1 || rows[0][0] != tasks[0].ID || rows[0][1] != string(tasks[0].State) || rows[0][2] != xssError {
			t.Errorf("lookup page %v; library %+v, %v", rows, tasks, err)
		}
	})

	t.Run("a POST without the token is refused", func(t *testing.T) {
		id := f.dead[1]
		btn := css(`tr[data-id="` + id + `"] button.requeue`)
		// Not logged in the button is disabled; enable it as a forged page
		// would and submit: the form carries the CSRF token, not the token.
		do(t, ctx, "forged requeue", chromedp.Navigate(base+"/dead?queue=orders"), chromedp.WaitVisible(css(`#dead-table`)),
			chromedp.RemoveAttribute(btn, "disabled"), chromedp.Click(btn), chromedp.WaitNotPresent(css(`#dead-table`)))
		body := get(t, ctx, "refusal", chromedp.Text(css(`body`)))
		if !strings.Contains(body, "refused") || !delaytest.DeadIDs(t, f.q)[id] {
			t.Errorf("requeue without the token: page %q, still dead %v", body, delaytest.DeadIDs(t, f.q)[id])
		}
	})

	t.Run("requeue through the UI leaves the dead set", func(t *testing.T) {
		id := f.dead[1]
		do(t, ctx, "log in and requeue", chromedp.Navigate(base+"/login?next="+url.QueryEscape("/dead?queue=orders")),
			chromedp.WaitVisible(css(`#token`)), chromedp.SendKeys(css(`#token`), token), chromedp.Click(css(`#login-submit`)),
			chromedp.WaitVisible(css(`#dead-table`)),
			chromedp.Click(css(`tr[data-id="`+id+`"] button.requeue`)), chromedp.WaitVisible(css(`#msg`)))
		msg := get(t, ctx, "message", chromedp.Text(css(`#msg`)))
		if !strings.Contains(msg, "requeued task "+id) {
			t.Errorf("message %q", msg)
		}
		if delaytest.DeadIDs(t, f.q)[id] {
			t.Errorf("task %s is still in the dead set after the requeue", id)
		}
		tasks, err := tasksOf(t.Context(), f.q, "order-001")
		// Requeue moves a task to due at Redis TIME, and a by-key listing
		// splits due from scheduled at its own later Redis TIME.
		if err != nil || len(tasks) != 1 || tasks[0].State != delay.StateDue {
			t.Errorf("requeued task: %+v, %v", tasks, err)
		}
		total := get(t, ctx, "total after", chromedp.AttributeValue(css(`#dead-total`), "data-total"))
		if total.Value != strconv.Itoa(len(f.dead)-1) {
			t.Errorf("dead total after the requeue %q, want %d", total.Value, len(f.dead)-1)
		}
	})

	t.Run("purge confirmation page", func(t *testing.T) {
		dead := delaytest.DeadIDs(t, f.q)
		do(t, ctx, "open purge all", chromedp.Navigate(base+"/dead?queue=orders"), chromedp.WaitVisible(css(`#purge-all`)),
			chromedp.Click(css(`#purge-all`)), chromedp.WaitVisible(css(`#purge-form`)))
		form := get(t, ctx, "purge form", chromedp.Evaluate[confirmForm](confirmFormJS(`#purge-form`, `#purge-submit`)))
		if want := "Purge all " + strconv.Itoa(len(dead)) + " dead letters of queue orders?"; !strings.Contains(form.Question, want) ||
			form.Queue != "orders" || form.ID != "" || !form.ConfirmRequired || form.SubmitDisabled || form.CSRF == "" {
			t.Errorf("purge-all page %+v; want question %q, queue orders, no id, a required confirm, an enabled button, a CSRF token", form, want)
		}
		screenshot(t, ctx, dir, "purge")
		do(t, ctx, "purge with the wrong name", chromedp.SendKeys(css(`#confirm`), "not-orders"), chromedp.Click(css(`#purge-submit`)),
			chromedp.WaitNotPresent(css(`#purge-form`)))
		body := get(t, ctx, "refusal", chromedp.Text(css(`body`)))
		if !strings.Contains(body, "not confirmed") || len(delaytest.DeadIDs(t, f.q)) != len(dead) {
			t.Errorf("purge with the wrong name: page %q, %d dead left of %d", body, len(delaytest.DeadIDs(t, f.q)), len(dead))
		}
		id := f.dead[2]
		do(t, ctx, "open purge one", chromedp.Navigate(base+"/dead?queue=orders"), chromedp.WaitVisible(css(`#dead-table`)),
			chromedp.Click(css(`tr[data-id="`+id+`"] a.danger`)), chromedp.WaitVisible(css(`#purge-form`)))
		form = get(t, ctx, "purge one form", chromedp.Evaluate[confirmForm](confirmFormJS(`#purge-form`, `#purge-submit`)))
		if !strings.Contains(form.Question, "Purge dead task "+id+" of queue orders?") || form.Queue != "orders" || form.ID != id {
			t.Errorf("purge-one page %+v; want task %s of orders", form, id)
		}
	})

	t.Run("requeue all through its confirmation page", func(t *testing.T) {
		dead := delaytest.DeadIDs(t, f.q)
		do(t, ctx, "open requeue all", chromedp.Navigate(base+"/dead?queue=orders"), chromedp.WaitVisible(css(`#requeue-all`)),
			chromedp.Click(css(`#requeue-all`)), chromedp.WaitVisible(css(`#requeue-form`)))
		form := get(t, ctx, "requeue form", chromedp.Evaluate[confirmForm](confirmFormJS(`#requeue-form`, `#requeue-submit`)))
		if want := "Requeue all " + strconv.Itoa(len(dead)) + " dead letters of queue orders?"; !strings.Contains(form.Question, want) ||
			form.Queue != "orders" || !form.ConfirmRequired || form.SubmitDisabled || form.CSRF == "" {
			t.Errorf("requeue-all page %+v; want question %q, queue orders, a required confirm, an enabled button, a CSRF token", form, want)
		}
		if len(delaytest.DeadIDs(t, f.q)) != len(dead) {
			t.Fatalf("opening the confirmation page requeued letters")
		}
		do(t, ctx, "confirm requeue all", chromedp.SendKeys(css(`#confirm`), "orders"), chromedp.Click(css(`#requeue-submit`)),
			chromedp.WaitVisible(css(`#msg`)))
		msg := get(t, ctx, "message", chromedp.Text(css(`#msg`)))
		total := get(t, ctx, "total after", chromedp.AttributeValue(css(`#dead-total`), "data-total"))
		if !strings.Contains(msg, "requeued "+strconv.Itoa(len(dead))+" dead letters") || total.Value != "0" || len(delaytest.DeadIDs(t, f.q)) != 0 {
			t.Errorf("after requeue-all: message %q, page total %q, %d still dead", msg, total.Value, len(delaytest.DeadIDs(t, f.q)))
		}
	})

	rowIDs := `Array.from(document.querySelectorAll('#promo-table tr[data-id]')).map(r => r.dataset.id)`
	t.Run("promotions listed, searched, escaped", func(t *testing.T) {
		do(t, ctx, "load /promotions", chromedp.Navigate(base+"/promotions"), chromedp.WaitVisible(css(`#promo-table`)))
		total := get(t, ctx, "total", chromedp.AttributeValue(css(`#promo-total`), "data-total"))
		ids := get(t, ctx, "rows", chromedp.Evaluate[[]string](rowIDs))
		if total.Value != strconv.Itoa(len(f.promos)) || len(ids) != len(f.promos) {
			t.Errorf("promotions: total %q, rows %v", total.Value, ids)
		}
		screenshot(t, ctx, dir, "promotions")
		do(t, ctx, "search", chromedp.SendKeys(css(`#search`), "spend"), chromedp.Click(css(`#search-submit`)),
			chromedp.WaitVisible(css(`#search[value="spend"]`)))
		if ids := get(t, ctx, "rows", chromedp.Evaluate[[]string](rowIDs)); strings.Join(ids, ",") != "spend-more" {
			t.Errorf("search for spend: %v", ids)
		}
		do(t, ctx, "xss promotion", chromedp.Navigate(base+"/promotion?id="+url.QueryEscape(xssName)), chromedp.WaitVisible(css(`#promo-id`)))
		name := get(t, ctx, "id", chromedp.Text(css(`#promo-id`)))
		injected := get(t, ctx, "count script and img", chromedp.Evaluate[int](`document.querySelectorAll('main script, main img').length`))
		if name != xssName || injected != 0 {
			t.Errorf("promotion ID shows as %q with %d script/img elements", name, injected)
		}
	})

	for _, id := range []string{"buy-more", "spend-more"} {
		t.Run("ladder equals the oracle: "+id, func(t *testing.T) {
			m, err := gradient.NewMatcher(f.promos[id])
			if err != nil {
				t.Fatal(err)
			}
			do(t, ctx, "load ladder", chromedp.Navigate(base+"/promotion?id="+id), chromedp.WaitVisible(css(`#ladder`)))
			rows := get(t, ctx, "ladder rows", chromedp.Evaluate[[][]string](
				`Array.from(document.querySelectorAll('#ladder tr[data-tier]')).map(r => [r.dataset.tier, r.querySelector('.threshold').textContent])`))
			if len(rows) != m.Len() {
				t.Fatalf("ladder has %d rows, oracle %d tiers", len(rows), m.Len())
			}
			for i, s := range m.Scores() {
				h, _ := m.MatchScore(s)
				th, err := decimal.NewFromString(strings.Fields(rows[i][1])[0])
				if rows[i][0] != h.Tier.ID || err != nil || !th.Equal(h.Tier.Threshold) {
					t.Errorf("row %d: %v, oracle %s from %s", i, rows[i], h.Tier.ID, h.Tier.Threshold)
				}
			}
			if steps := get(t, ctx, "step chart", chromedp.Evaluate[int](`document.querySelectorAll('svg.steps circle').length`)); steps != m.Len() {
				t.Errorf("step chart has %d steps, want %d", steps, m.Len())
			}
		})
	}

	t.Run("simulator equals Match", func(t *testing.T) {
		for _, tc := range []struct{ id, value string }{
			{"buy-more", "1"}, {"buy-more", "4"}, {"buy-more", "7"}, {"buy-more", "12"},
			{"spend-more", "98.99"}, {"spend-more", "199.98"}, {"spend-more", "199.99"}, {"spend-more", "650"},
		} {
			p := f.promos[tc.id]
			value := decimal.RequireFromString(tc.value)
			res, err := f.c.Match(t.Context(), cache.Query{Promotion: tc.id, Metric: p.Metric, Value: value}, cache.MatchOptions{Next: true, Gifts: true})
			if err != nil && !errors.Is(err, cache.ErrNoTier) {
				t.Fatal(err)
			}
			info, err := f.c.Info(t.Context(), tc.id)
			if err != nil {
				t.Fatal(err)
			}
			want := "none reached"
			if res.Tier != nil {
				want = res.Tier.ID + " (threshold"
			}
			do(t, ctx, "simulate", chromedp.Navigate(base+"/promotion?id="+tc.id), chromedp.WaitVisible(css(`#sim-value`)),
				chromedp.SendKeys(css(`#sim-value`), tc.value), chromedp.SendKeys(css(`#sim-base`), simBase),
				chromedp.Click(css(`#sim-submit`)), chromedp.WaitVisible(css(`#sim-tier`)))
			sim := get(t, ctx, "simulator", chromedp.Evaluate[map[string]string](simJS))
			if !strings.HasPrefix(sim["tier"], want) {
				t.Errorf("%s at %s: simulator %q, Match %q", tc.id, tc.value, sim["tier"], want)
			}
			checkNext(t, tc.id+" at "+tc.value, sim["next"], res)
			if res.Tier == nil {
				if _, shown := sim["discount"]; shown {
					t.Errorf("%s at %s: no tier reached, yet a discount %q", tc.id, tc.value, sim["discount"])
				}
			} else {
				// The page's rounding default, half-up, and the digits stored with the promotion.
				off, err := res.Tier.Reward.Discount(decimal.RequireFromString(simBase), value, info.MinorDigits, gradient.RoundHalfUp)
				if err != nil {
					t.Fatal(err)
				}
				checkDiscount(t, tc.id+" at "+tc.value, sim["discount"], off)
				if got, want := sim["gifts"], giftText(res.Tier.Gifts); got != want {
					t.Errorf("%s at %s: gifts %q, Match %q", tc.id, tc.value, got, want)
				}
			}
			if tc.id == "buy-more" && tc.value == "7" {
				screenshot(t, ctx, dir, "promotion")
			}
		}
	})
}

// simBase is the line total the simulator subtests type as the base.
const simBase = "300"

// simJS reads the simulator's answer cells present on the page, by name.
const simJS = `Object.fromEntries(["tier", "discount", "gifts", "next"].map(k => [k, document.getElementById("sim-" + k)]).filter(e => e[1]).map(e => [e[0], e[1].textContent.trim()]))`

// confirmForm is what a confirmation page shows and would post.
type confirmForm struct {
	Question        string `json:"question"`
	Queue           string `json:"queue"`
	ID              string `json:"id"`
	CSRF            string `json:"csrf"`
	ConfirmRequired bool   `json:"confirmRequired"`
	SubmitDisabled  bool   `json:"submitDisabled"`
}

func confirmFormJS(form, submit string) string {
	return `(() => { const f = document.querySelector('` + form + `'), v = n => (f.querySelector('[name="' + n + '"]') || {}).value || "";
		return {question: document.querySelector('p.warn').textContent.replace(/\s+/g, " ").trim(), queue: v("queue"), id: v("id"), csrf: v("csrf"),
			confirmRequired: f.querySelector('#confirm').required, submitDisabled: document.querySelector('` + submit + `').disabled}; })()`
}

var (
	nextRe     = regexp.MustCompile(`^(\S+) at ([0-9.]+)(?: items?)?: ([0-9.]+)(?: items?)? more for `)
	discountRe = regexp.MustCompile(`^([0-9.]+) off ([0-9.]+), pay ([0-9.]+) `)
)

// checkNext compares the simulator's next-tier line with Match's Next
// and Shortfall, as numbers.
func checkNext(t *testing.T, what, next string, res cache.Result) {
	t.Helper()
	if res.Next == nil {
		if !strings.HasPrefix(next, "none") {
			t.Errorf("%s: next %q, Match has none", what, next)
		}
		return
	}
	m := nextRe.FindStringSubmatch(next)
	if m == nil || m[1] != res.Next.ID || !decimal.RequireFromString(m[2]).Equal(res.Next.Threshold) || !decimal.RequireFromString(m[3]).Equal(res.Shortfall) {
		t.Errorf("%s: next %q; Match next %s at %s, shortfall %s", what, next, res.Next.ID, res.Next.Threshold, res.Shortfall)
	}
}

// checkDiscount compares the simulator's discount line with off, the
// discount of Match's reward.
func checkDiscount(t *testing.T, what, shown string, off decimal.Decimal) {
	t.Helper()
	base := decimal.RequireFromString(simBase)
	m := discountRe.FindStringSubmatch(shown)
	if m == nil || !decimal.RequireFromString(m[1]).Equal(off) || !decimal.RequireFromString(m[2]).Equal(base) || !decimal.RequireFromString(m[3]).Equal(base.Sub(off)) {
		t.Errorf("%s: discount %q; from Match's reward %s off %s", what, shown, off, base)
	}
}

// giftText is how the simulator lists gifts.
func giftText(gs []gradient.Gift) string {
	if len(gs) == 0 {
		return "none"
	}
	parts := make([]string, len(gs))
	for i, g := range gs {
		parts[i] = fmt.Sprintf("%d × %s", g.Qty, g.SKU)
		if g.Name != "" {
			parts[i] += " (" + g.Name + ")"
		}
	}
	return strings.Join(parts, ", ")
}
