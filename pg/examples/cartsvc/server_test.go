package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"
	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/pg"
	"github.com/tierset/tierset/pg/internal/pgtest"
	"github.com/tierset/tierset/rules"
	"github.com/tierset/tierset/warm"
)

func demoPromotions(t testing.TB) []gradient.Promotion {
	t.Helper()
	ps, err := rules.Parse(bytes.NewReader(demoRules), "demo_rules.json", rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// noPricer fails the test if a refused request reaches the cache.
type noPricer struct{ t *testing.T }

func (p noPricer) MatchCart(context.Context, []cache.Query, cache.MatchOptions) ([]cache.Result, error) {
	p.t.Error("a bad request reached the cache")
	return nil, nil
}

func do(t *testing.T, h http.Handler, method, path, body string) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s %s: %d, body %q is not JSON: %v", method, path, rec.Code, rec.Body.String(), err)
	}
	return rec.Code, out
}

// goType matches what a Go type looks like in a message.
var goType = regexp.MustCompile(`\[\]|map\[|json\.|decimal\.|struct|interface|RawMessage|int64|float64|\*main\.`)

// TestOpenAPIServed: the service serves its OpenAPI document.
func TestOpenAPIServed(t *testing.T) {
	h := newServer(noPricer{t}, serverOptions{MinorDigits: 2})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.json", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" || !bytes.Equal(rec.Body.Bytes(), openapiDoc) {
		t.Fatalf("GET /openapi.json: %d %s, %d bytes; want 200 application/json and the document", rec.Code, rec.Header().Get("Content-Type"), rec.Body.Len())
	}
}

func TestPriceBadRequests(t *testing.T) {
	h := newServer(noPricer{t}, serverOptions{MinorDigits: 2})
	line := `{"promotion": "p1", "quantity": 3, "base": "10.00"}`
	tests := []struct {
		name, body, field string
	}{
		{"not JSON", `{`, ""},
		{"no lines", `{}`, "lines"},
		{"empty lines", `{"lines": []}`, "lines"},
		{"too many lines", `{"lines": [` + strings.Repeat(line+",", maxLines) + line + `]}`, "lines"},
		{"unknown top field", `{"lines": [` + line + `], "coupon": "x"}`, "coupon"},
		{"lines not an array", `{"lines": 3}`, "lines"},
		{"unknown line field", `{"lines": [{"promotion": "p1", "quantity": 3, "base": "1", "sku": "x"}]}`, "lines[0].sku"},
		{"no promotion", `{"lines": [{"quantity": 3, "base": "1"}]}`, "lines[0].promotion"},
		{"promotion with a brace", `{"lines": [{"promotion": "p{1}", "quantity": 3, "base": "1"}]}`, "lines[0].promotion"},
		{"promotion not a string", `{"lines": [{"promotion": 7, "quantity": 3, "base": "1"}]}`, "lines[0].promotion"},
		{"neither quantity nor amount", `{"lines": [` + line + `, {"promotion": "p1", "base": "1"}]}`, "lines[1].quantity"},
		{"both quantity and amount", `{"lines": [{"promotion": "p1", "quantity": 3, "amount": "5", "base": "1"}]}`, "lines[0].quantity"},
		{"fractional quantity", `{"lines": [{"promotion": "p1", "quantity": 2.5, "base": "1"}]}`, "lines[0].quantity"},
		{"negative quantity", `{"lines": [{"promotion": "p1", "quantity": -1, "base": "1"}]}`, "lines[0].quantity"},
		{"amount not a number", `{"lines": [{"promotion": "p1", "amount": "lots", "base": "1"}]}`, "lines[0].amount"},
		{"negative amount", `{"lines": [{"promotion": "p1", "amount": "-0.01", "base": "1"}]}`, "lines[0].amount"},
		{"no base", `{"lines": [{"promotion": "p1", "quantity": 3}]}`, "lines[0].base"},
		{"null base", `{"lines": [{"promotion": "p1", "quantity": 3, "base": null}]}`, "lines[0].base"},
		{"negative base", `{"lines": [{"promotion": "p1", "quantity": 3, "base": "-5"}]}`, "lines[0].base"},
		{"trailing data", `{"lines": [` + line + `]} {}`, ""},
		{"lines a string", `{"lines": "x"}`, "lines"},
		{"lines an object", `{"lines": {}}`, "lines"},
		{"line an array", `{"lines": [[]]}`, "lines[0]"},
		{"line a string", `{"lines": ["p1"]}`, "lines[0]"},
		{"promotion an object", `{"lines": [{"promotion": {}, "quantity": 3, "base": "1"}]}`, "lines[0].promotion"},
		{"quantity an array", `{"lines": [{"promotion": "p1", "quantity": [], "base": "1"}]}`, "lines[0].quantity"},
		{"base an object", `{"lines": [{"promotion": "p1", "quantity": 3, "base": {}}]}`, "lines[0].base"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := do(t, h, http.MethodPost, "/v1/cart/price", tt.body)
			if code != http.StatusBadRequest || out["type"] != probBadRequest || out["detail"] == "" || out["status"] != float64(400) {
				t.Fatalf("got %d %v, want 400 with a bad-request problem", code, out)
			}
			if got, _ := out["field"].(string); got != tt.field {
				t.Fatalf("problem field %q, want %q (%v)", got, tt.field, out["detail"])
			}
			if d, _ := out["detail"].(string); strings.Contains(d, "json:") || strings.Contains(d, "invalid character") || strings.Contains(d, "body:") {
				t.Fatalf("detail shows a decoder error: %q", d)
			}
			// a client speaks JSON: no Go type in what it is told
			if d, _ := out["detail"].(string); goType.MatchString(d) {
				t.Fatalf("detail names a Go type: %q", d)
			}
		})
	}
	if code, _ := do(t, h, http.MethodPost, "/v1/cart/price", `{"lines": [{"promotion": "p1", "quantity": 1, "base": "`+strings.Repeat("9", maxBodyBytes)+`"}]}`); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body: %d, want 413", code)
	}
}

// warmedCache warms the demo promotions into a private Redis.
func warmedCache(t *testing.T) (*cache.Cache, *testredis.Server, *redis.Client) {
	t.Helper()
	srv := testredis.StartServer(t)
	rc := srv.Client(&redis.Options{MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	c, err := cache.New(rc, cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := warm.Warm(t.Context(), c, demoPromotions(t), warm.Options{}); err != nil {
		t.Fatal(err)
	}
	return c, srv, rc
}

// TestPriceMatchesOracle prices every demo promotion at many values and
// compares tier, discount and next tier with gradient's in-memory matcher.
func TestPriceMatchesOracle(t *testing.T) {
	c, _, _ := warmedCache(t)
	h := newServer(c, serverOptions{MinorDigits: 2})
	for _, p := range demoPromotions(t) {
		m, err := gradient.NewMatcher(p)
		if err != nil {
			t.Fatal(err)
		}
		for v := range 260 {
			value := decimal.NewFromInt(int64(v))
			field := "quantity"
			if p.Metric == gradient.Amount {
				value = decimal.New(int64(v)*137, -2) // 0.00, 1.37, ... 355.73
				field = "amount"
			}
			base := value.Mul(decimal.NewFromInt(10)).Add(decimal.RequireFromString("0.05"))
			body := fmt.Sprintf(`{"lines": [{"promotion": %q, %q: %q, "base": %q}]}`, p.ID, field, value.String(), base.String())
			if field == "quantity" {
				body = fmt.Sprintf(`{"lines": [{"promotion": %q, "quantity": %d, "base": %q}]}`, p.ID, v, base.String())
			}
			code, out := do(t, h, http.MethodPost, "/v1/cart/price", body)
			if code != http.StatusOK {
				t.Fatalf("%s: %d %v", body, code, out)
			}
			ln := out["lines"].([]any)[0].(map[string]any)
			hit, err := m.Match(value)
			wantTier, wantDiscount := "", "0.00"
			if err == nil {
				wantTier = hit.Tier.ID
				d, err := hit.Tier.Reward.Discount(base, value, 2, gradient.RoundHalfUp)
				if err != nil {
					t.Fatal(err)
				}
				wantDiscount = d.StringFixed(2)
			}
			gotTier := ""
			if tier, ok := ln["tier"].(map[string]any); ok {
				gotTier = tier["id"].(string)
			}
			if gotTier != wantTier || ln["discount"] != wantDiscount {
				t.Fatalf("%s: tier %q discount %v, oracle says %q %s", body, gotTier, ln["discount"], wantTier, wantDiscount)
			}
			if wantTier == "" && (ln["outcome"] != "no_tier" || ln["problem"] != nil) {
				t.Fatalf("%s: below the first tier answered %v, want outcome no_tier and no problem", body, ln)
			}
		}
	}
}

func TestFaultPriceRedisOutage(t *testing.T) {
	c, srv, rc := warmedCache(t)
	h := newServer(c, serverOptions{MinorDigits: 2, Ready: func(ctx context.Context) error { return rc.Ping(ctx).Err() }})
	cart := `{"lines": [{"promotion": "qty-3-5-10", "quantity": 7, "base": "70.00"}]}`
	if code, out := do(t, h, http.MethodPost, "/v1/cart/price", cart); code != http.StatusOK {
		t.Fatalf("before the outage: %d %v", code, out)
	}
	if code, _ := do(t, h, http.MethodGet, "/readyz", ""); code != http.StatusOK {
		t.Fatalf("readyz before the outage: %d", code)
	}
	srv.Kill()
	code, out := do(t, h, http.MethodPost, "/v1/cart/price", cart)
	if code != http.StatusServiceUnavailable || out["type"] != probUnavailable || strings.Contains(fmt.Sprint(out), "dial") ||
		strings.Contains(fmt.Sprint(out), "cache:") {
		t.Fatalf("during the outage: %d %v, want 503 unavailable with no internal error", code, out)
	}
	if code, _ := do(t, h, http.MethodGet, "/readyz", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("readyz during the outage: %d, want 503", code)
	}
	if code, _ := do(t, h, http.MethodGet, "/healthz", ""); code != http.StatusOK {
		t.Fatalf("healthz during the outage: %d, want 200 (the process is alive)", code)
	}
}

// startService runs the whole service (Postgres, warm, watch, HTTP) on a
// free loopback port against a fresh schema and a private Redis.
func startService(t *testing.T) (string, *testredis.Server) {
	t.Helper()
	pool, schema := pgtest.Schema(t)
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := pg.Migrate(ctx, pool, schema); err != nil {
		t.Fatal(err)
	}
	srv := testredis.StartServer(t)
	cfg := config{source: pgtest.URL(t), schema: schema, redisURL: "redis://" + srv.Addr() + "/0", prefix: "cartsvc", minorDigits: 2}
	s, err := open(ctx, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := savePromotions(ctx, s, demoPromotions(t)...); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done, err := s.start(ctx, l, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-done; s.close() })
	return "http://" + l.Addr().String(), srv
}

// TestLoadCart20Lines is a bounded loopback load test: 16 clients send
// 8,000 carts of 20 lines each to the running service.
func TestLoadCart20Lines(t *testing.T) {
	base, _ := startService(t)
	ps := demoPromotions(t)
	carts := make([][]byte, 64)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range carts {
		var lines []string
		for range 20 {
			p := ps[rng.IntN(len(ps))]
			if p.Metric == gradient.Quantity {
				lines = append(lines, fmt.Sprintf(`{"promotion": %q, "quantity": %d, "base": "%d.00"}`, p.ID, rng.IntN(12), 10+rng.IntN(200)))
			} else {
				lines = append(lines, fmt.Sprintf(`{"promotion": %q, "amount": "%d.%02d", "base": "%d.00"}`, p.ID, rng.IntN(400), rng.IntN(100), 400))
			}
		}
		carts[i] = []byte(`{"lines": [` + strings.Join(lines, ",") + `]}`)
	}
	const clients, total = 16, 8000
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	lat := make([][]time.Duration, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range clients {
		wg.Go(func() {
			for i := w; i < total; i += clients {
				t0 := time.Now()
				resp, err := hc.Post(base+"/v1/cart/price", "application/json", bytes.NewReader(carts[i%len(carts)]))
				if err != nil {
					errs[w] = err
					return
				}
				var out cartResponse
				err = json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || len(out.Lines) != 20 {
					errs[w] = fmt.Errorf("status %d, %d lines, %v", resp.StatusCode, len(out.Lines), err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	q := func(p float64) time.Duration { return all[min(len(all)-1, int(float64(len(all))*p))] }
	t.Logf("cartsvc load: %d carts × 20 lines, %d clients on loopback: %.0f req/s (%.0f lines/s), p50 %v, p99 %v, max %v",
		len(all), clients, float64(len(all))/elapsed.Seconds(), 20*float64(len(all))/elapsed.Seconds(),
		q(0.50).Round(time.Microsecond), q(0.99).Round(time.Microsecond), all[len(all)-1].Round(time.Microsecond))
	if len(all) != total {
		t.Fatalf("%d of %d requests answered", len(all), total)
	}
}

func TestDemo(t *testing.T) {
	pgtest.URL(t) // skips without a database
	srv := testredis.StartServer(t)
	var out bytes.Buffer
	cfg := config{source: pgtest.URL(t), redisURL: "redis://" + srv.Addr() + "/0", minorDigits: 2}
	if err := runDemo(t.Context(), cfg, &out); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	for _, want := range []string{"seeded 4 promotions", `"discount": "39.00"`, `"field": "lines[0].quantity"`, "Redis had it", `"discount": "17.50"`, "dropped schema"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestFaultPriceAfterRedisLoss: the private Redis loses everything
// (FLUSHALL) under the running service; the next carts are priced the same,
// each promotion loaded once from PostgreSQL by the read-through loader.
func TestFaultPriceAfterRedisLoss(t *testing.T) {
	base, srv := startService(t)
	var lines []string
	for _, p := range demoPromotions(t) {
		if p.Metric == gradient.Quantity {
			lines = append(lines, fmt.Sprintf(`{"promotion": %q, "quantity": 7, "base": "70.00"}`, p.ID))
		} else {
			lines = append(lines, fmt.Sprintf(`{"promotion": %q, "amount": "149.99", "base": "149.99"}`, p.ID))
		}
	}
	body := `{"lines": [` + strings.Join(lines, ",") + `]}`
	price := func() string {
		t.Helper()
		resp, err := http.Post(base+"/v1/cart/price", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("price: %d %s", resp.StatusCode, out)
		}
		return string(out)
	}
	before := price()
	if err := srv.Client(nil).FlushAll(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	after := price()
	// Answered through the loader, not from a stale in-process copy: the
	// loads were written back to Redis through Refresh.
	if n, err := srv.Client(nil).Exists(t.Context(), "cartsvc:{p:"+demoPromotions(t)[0].ID+"}:tiers").Result(); err != nil || n != 1 {
		t.Fatalf("the first promotion is not back in Redis after the cart (%d, %v): the loader did not run", n, err)
	}
	if after != before {
		t.Fatalf("after losing Redis the cart is priced differently:\nbefore %s\nafter  %s", before, after)
	}
	t.Logf("cartsvc after FLUSHALL: %d lines priced as before, loaded from PostgreSQL", len(lines))
}
