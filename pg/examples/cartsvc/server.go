package main

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"
	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
)

// Limits of one request.
const (
	maxBodyBytes = 1 << 20
	maxLines     = 200
)

// Pricer is what the service needs of a *cache.Cache.
type Pricer interface {
	MatchCart(ctx context.Context, qs []cache.Query, opt cache.MatchOptions) ([]cache.Result, error)
}

// Pinger tells readiness (Redis answering).
type Pinger func(ctx context.Context) error

// serverOptions configure the handler.
type serverOptions struct {
	// MinorDigits is the currency's minor-unit digits, for rounding
	// discounts (the cache encodes amount queries with the same), read as
	// gradient.Promotion.MinorDigits: 0 is 2, gradient.NoMinorDigits none.
	MinorDigits int
	Rounding    gradient.Rounding
	// Timeout bounds one pricing call to Redis.
	Timeout time.Duration
	// Ready reports whether the service can answer; nil means always.
	Ready Pinger
	// OnError sees the internal errors behind a 503 (which the client
	// is never shown); nil drops them.
	OnError func(error)
	// Budget, when set, says per line whether its promotion can still be
	// given (budget.go); nil prices without caps.
	Budget Offerer
}

type server struct {
	c Pricer
	o serverOptions
}

func newServer(c Pricer, o serverOptions) http.Handler {
	o.Rounding = cmp.Or(o.Rounding, gradient.RoundHalfUp)
	o.Timeout = cmp.Or(o.Timeout, 2*time.Second)
	s := &server{c: c, o: o}
	routes := map[string]map[string]http.HandlerFunc{
		"/v1/cart/price": {http.MethodPost: s.price},
		"/healthz": {http.MethodGet: func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		}},
		"/readyz": {http.MethodGet: s.ready},
		"/openapi.json": {http.MethodGet: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(openapiDoc)
		}},
	}
	// A small router rather than ServeMux, whose 404 and 405 answers are
	// text/plain: every error of this API is a problem document.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		methods, ok := routes[r.URL.Path]
		if !ok {
			writeProblem(w, problem{Type: probNotFound, Title: "No such resource", Status: http.StatusNotFound,
				Detail: "this API has /v1/cart/price, /healthz, /readyz and /openapi.json"})
			return
		}
		h, ok := methods[r.Method]
		if !ok {
			var allow []string
			for m := range methods {
				allow = append(allow, m)
			}
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeProblem(w, problem{Type: probMethod, Title: "Method not allowed", Status: http.StatusMethodNotAllowed,
				Detail: r.URL.Path + " takes " + strings.Join(allow, ", ")})
			return
		}
		h(w, r)
	})
}

// Wire types. Money travels as JSON strings or numbers and is read from
// its text into decimal.Decimal: never through a float.

type cartRequest struct {
	Lines []json.RawMessage `json:"lines"`
	// Customer is who buys: the value of caps counted per customer.
	Customer string `json:"customer"`
}

type lineRequest struct {
	Promotion string          `json:"promotion"`
	Quantity  json.RawMessage `json:"quantity"`
	Amount    json.RawMessage `json:"amount"`
	Base      json.RawMessage `json:"base"`
}

type tierJSON struct {
	ID        string `json:"id"`
	Threshold string `json:"threshold"`
}

type rewardJSON struct {
	Kind    string `json:"kind"`
	Percent string `json:"percent,omitempty"`
	Amount  string `json:"amount,omitempty"`
	Step    string `json:"step,omitempty"`
	Cap     string `json:"cap,omitempty"`
}

type nextJSON struct {
	ID        string     `json:"id"`
	Threshold string     `json:"threshold"`
	Shortfall string     `json:"shortfall"`
	Reward    rewardJSON `json:"reward"`
}

type giftJSON struct {
	SKU  string `json:"sku"`
	Qty  int    `json:"qty"`
	Name string `json:"name,omitempty"`
}

// Problem type URIs (RFC 9457): stable names clients branch on. They are
// URNs, not links: they identify, they are not documentation pages (the
// OpenAPI document describes each).
const (
	probBadRequest  = "urn:tierset:cartsvc:bad-request"
	probTooLarge    = "urn:tierset:cartsvc:too-large"
	probUnavailable = "urn:tierset:cartsvc:unavailable"
	probNotFound    = "urn:tierset:cartsvc:not-found"
	probMethod      = "urn:tierset:cartsvc:method-not-allowed"
	// Per line (inside a 200):
	probUnknownPromotion = "urn:tierset:cartsvc:unknown-promotion"
	probNotActive        = "urn:tierset:cartsvc:not-active"
	probMetricMismatch   = "urn:tierset:cartsvc:metric-mismatch"
	probCurrency         = "urn:tierset:cartsvc:currency-mismatch"
	probGiftsGone        = "urn:tierset:cartsvc:gifts-gone"
	probBadLine          = "urn:tierset:cartsvc:bad-line"
	probLineFailed       = "urn:tierset:cartsvc:line-failed"
)

// problem is an RFC 9457 problem document; Field names the request
// field at fault (an extension member).
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status,omitempty"`
	Detail string `json:"detail,omitempty"`
	Field  string `json:"field,omitempty"`
}

func writeProblem(w http.ResponseWriter, p problem) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

type lineResponse struct {
	Promotion string      `json:"promotion"`
	Tier      *tierJSON   `json:"tier,omitempty"`
	Reward    *rewardJSON `json:"reward,omitempty"`
	Discount  string      `json:"discount"`
	Next      *nextJSON   `json:"next,omitempty"`
	Gifts     []giftJSON  `json:"gifts,omitempty"`
	Version   string      `json:"version,omitempty"`
	// Outcome is "tier" (a tier reached), "no_tier" (none reached: a
	// normal answer, with Next saying how far the first one is) or
	// "problem" (Problem says why the line has no answer).
	Outcome string   `json:"outcome"`
	Problem *problem `json:"problem,omitempty"`
	// Budget is set on a hit whose promotion a budget caps (budget.go).
	Budget *budgetJSON `json:"budget,omitempty"`
}

type cartResponse struct {
	Lines    []lineResponse `json:"lines"`
	Discount string         `json:"discount"`
}

// badField is a 400 naming the request field at fault.
type badField struct{ field, msg string }

func (e *badField) Error() string { return e.field + ": " + e.msg }

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *server) ready(w http.ResponseWriter, r *http.Request) {
	if s.o.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if err := s.o.Ready(ctx); err != nil {
			s.internal(err)
			writeProblem(w, problem{Type: probUnavailable, Title: "Not ready", Status: http.StatusServiceUnavailable,
				Detail: "the promotion store does not answer"})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *server) price(w http.ResponseWriter, r *http.Request) {
	qs, bases, customer, err := parseCart(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var bf *badField
		var tooBig *http.MaxBytesError
		var syn *json.SyntaxError
		switch {
		case errors.As(err, &tooBig):
			writeProblem(w, problem{Type: probTooLarge, Title: "Request too large", Status: http.StatusRequestEntityTooLarge,
				Detail: fmt.Sprintf("the body is over %d bytes", maxBodyBytes)})
		case errors.As(err, &bf):
			writeProblem(w, problem{Type: probBadRequest, Title: "Bad request", Status: http.StatusBadRequest, Field: bf.field, Detail: bf.msg})
		case errors.As(err, &syn):
			writeProblem(w, problem{Type: probBadRequest, Title: "Bad request", Status: http.StatusBadRequest,
				Detail: fmt.Sprintf("the body is not valid JSON (at byte %d)", syn.Offset)})
		default:
			// Never the decoder's or reader's text: the message is ours.
			writeProblem(w, problem{Type: probBadRequest, Title: "Bad request", Status: http.StatusBadRequest,
				Detail: "the body must be one JSON object with a lines array"})
		}
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.o.Timeout)
	defer cancel()
	rs, err := s.c.MatchCart(ctx, qs, cache.MatchOptions{Next: true, Gifts: true})
	if err != nil {
		s.internal(err)
		writeProblem(w, problem{Type: probUnavailable, Title: "Pricing unavailable", Status: http.StatusServiceUnavailable,
			Detail: "the promotion store did not answer in time; try again"})
		return
	}
	offers, prob := s.offers(ctx, customer, rs)
	if prob != nil {
		writeProblem(w, *prob)
		return
	}
	resp := cartResponse{Lines: make([]lineResponse, len(rs))}
	total := decimal.Zero
	digits := int32(gradient.Digits(s.o.MinorDigits))
	for i, res := range rs {
		lr := lineResponse{Promotion: res.Promotion, Version: res.Version, Discount: decimal.Zero.StringFixed(digits), Outcome: "tier"}
		if res.Next != nil {
			lr.Next = &nextJSON{ID: res.Next.ID, Threshold: res.Next.Threshold.String(), Shortfall: res.Shortfall.String(), Reward: rewardOf(res.Next.Reward)}
		}
		if res.Tier != nil {
			lr.Tier = &tierJSON{ID: res.Tier.ID, Threshold: res.Tier.Threshold.String()}
			rw := rewardOf(res.Tier.Reward)
			lr.Reward = &rw
			for _, g := range res.Tier.Gifts {
				lr.Gifts = append(lr.Gifts, giftJSON{SKU: g.SKU, Qty: g.Qty, Name: g.Name})
			}
			d, err := res.Tier.Reward.Discount(bases[i], qs[i].Value, s.o.MinorDigits, s.o.Rounding)
			if err != nil {
				lr.Outcome, lr.Problem = "problem", &problem{Type: probBadLine, Title: "Discount not computable",
					Detail: "the tier's reward cannot apply to this line's base and value"}
			} else {
				d = s.capped(&lr, offers, i, d, digits)
				lr.Discount = d.StringFixed(digits)
				total = total.Add(d)
			}
		}
		switch {
		case errors.Is(res.Err, cache.ErrNoTier):
			lr.Outcome = "no_tier"
		case res.Err != nil && lr.Problem == nil:
			lp := lineProblem(res.Promotion, res.Err)
			if lp.Type == probLineFailed {
				s.internal(res.Err)
			}
			lr.Outcome, lr.Problem = "problem", &lp
		}
		resp.Lines[i] = lr
	}
	resp.Discount = total.StringFixed(digits)
	writeJSON(w, http.StatusOK, resp)
}

// lineProblem describes a line without an answer, in the service's own
// words: the library's error chain stays in the process (OnError).
func lineProblem(promo string, err error) problem {
	q := strconv.Quote(promo)
	switch {
	case errors.Is(err, cache.ErrNotFound):
		return problem{Type: probUnknownPromotion, Title: "Unknown promotion", Detail: "promotion " + q + " does not exist"}
	case errors.Is(err, cache.ErrNotActive):
		return problem{Type: probNotActive, Title: "Promotion not active", Detail: "promotion " + q + " is outside its time window"}
	case errors.Is(err, cache.ErrMetricMismatch):
		return problem{Type: probMetricMismatch, Title: "Wrong metric", Detail: "promotion " + q + " counts the other metric (quantity or amount)"}
	case errors.Is(err, cache.ErrDigitsMismatch):
		return problem{Type: probCurrency, Title: "Other currency", Detail: "promotion " + q +
			" is priced in a currency with other minor digits than this service's -minor-digits"}
	case errors.Is(err, cache.ErrGiftsGone):
		return problem{Type: probGiftsGone, Title: "Gifts unavailable", Detail: "the gift list of promotion " + q + " changed while it was read; try again"}
	case errors.Is(err, &cache.ValidationError{Field: "query"}), errors.Is(err, &cache.ValidationError{Field: "id"}):
		return problem{Type: probBadLine, Title: "Bad line", Detail: "the line's value cannot be matched against promotion " + q}
	}
	return problem{Type: probLineFailed, Title: "Line not priced", Detail: "promotion " + q + " could not be read; try again"}
}

func (s *server) internal(err error) {
	if s.o.OnError != nil {
		s.o.OnError(err)
	}
}

func rewardOf(r gradient.Reward) rewardJSON {
	out := rewardJSON{Kind: rewardKinds[r.Kind]}
	str := func(d decimal.Decimal) string {
		if d.IsZero() {
			return ""
		}
		return d.String()
	}
	out.Percent, out.Amount, out.Step, out.Cap = str(r.Percent), str(r.Amount), str(r.Step), str(r.Cap)
	return out
}

var rewardKinds = map[gradient.RewardKind]string{
	gradient.PercentOff: "percent_off", gradient.AmountOff: "amount_off",
	gradient.FixedPrice: "fixed_price", gradient.EveryN: "every_n",
}

// parseCart reads and checks a request; every refusal names its field.
func parseCart(body io.Reader) ([]cache.Query, []decimal.Decimal, string, error) {
	qs, bases, req, err := parseLines(body)
	return qs, bases, req.Customer, err
}

func parseLines(body io.Reader) ([]cache.Query, []decimal.Decimal, cartRequest, error) {
	raw, err := io.ReadAll(body)
	if err != nil {
		return nil, nil, cartRequest{}, err
	}
	var req cartRequest
	if err := strictDecode(raw, &req); err != nil {
		return nil, nil, req, err
	}
	switch {
	case len(req.Lines) == 0:
		return nil, nil, req, &badField{"lines", "at least one line is required"}
	case len(req.Lines) > maxLines:
		return nil, nil, req, &badField{"lines", fmt.Sprintf("%d lines (max %d)", len(req.Lines), maxLines)}
	}
	qs := make([]cache.Query, len(req.Lines))
	bases := make([]decimal.Decimal, len(req.Lines))
	for i, rawLine := range req.Lines {
		at := "lines[" + strconv.Itoa(i) + "]"
		var ln lineRequest
		if err := strictDecode(rawLine, &ln); err != nil {
			var bf *badField
			if errors.As(err, &bf) {
				bf.field = strings.TrimSuffix(at+"."+bf.field, ".")
				return nil, nil, req, bf
			}
			return nil, nil, req, &badField{at, err.Error()}
		}
		ln.Quantity, ln.Amount, ln.Base = absent(ln.Quantity), absent(ln.Amount), absent(ln.Base)
		if err := gradient.ValidateID(ln.Promotion); err != nil {
			return nil, nil, req, &badField{at + ".promotion", err.Error()}
		}
		switch {
		case ln.Quantity != nil && ln.Amount != nil:
			return nil, nil, req, &badField{at + ".quantity", "give quantity or amount, not both"}
		case ln.Quantity != nil:
			n, err := strconv.ParseInt(string(ln.Quantity), 10, 64)
			if err != nil || n < 0 {
				return nil, nil, req, &badField{at + ".quantity", notWhole(ln.Quantity)}
			}
			qs[i] = cache.QuantityQuery(ln.Promotion, n)
		case ln.Amount != nil:
			d, err := money(ln.Amount)
			if err != nil {
				return nil, nil, req, &badField{at + ".amount", err.Error()}
			}
			qs[i] = cache.AmountQuery(ln.Promotion, d)
		default:
			return nil, nil, req, &badField{at + ".quantity", "quantity (items) or amount (money) is required"}
		}
		if ln.Base == nil {
			return nil, nil, req, &badField{at + ".base", "base (the line's price before discount) is required"}
		}
		d, err := money(ln.Base)
		if err != nil {
			return nil, nil, req, &badField{at + ".base", err.Error()}
		}
		bases[i] = d
	}
	return qs, bases, req, nil
}

// notWhole says why raw is no quantity: a number echoed ("2.5 is not a
// whole number ≥ 0"), any other JSON by its kind, never its text.
func notWhole(raw json.RawMessage) string {
	switch raw[0] {
	case '[':
		return "want a whole number ≥ 0, got a JSON array"
	case '{':
		return "want a whole number ≥ 0, got a JSON object"
	case '"':
		return "want a whole number ≥ 0, got a JSON string"
	case 't', 'f':
		return "want a whole number ≥ 0, got a JSON boolean"
	}
	return fmt.Sprintf("%s is not a whole number ≥ 0", raw)
}

// absent treats a JSON null like a missing field.
func absent(raw json.RawMessage) json.RawMessage {
	if string(raw) == "null" {
		return nil
	}
	return raw
}

// money reads a non-negative decimal from a JSON number or string, from
// its text.
func money(raw json.RawMessage) (decimal.Decimal, error) {
	text := string(raw)
	if unq, err := strconv.Unquote(text); err == nil {
		text = unq
	}
	d, err := decimal.NewFromString(text)
	if err != nil {
		return decimal.Decimal{}, fmt.Errorf("%s is not a decimal number", raw)
	}
	if d.Sign() < 0 {
		return decimal.Decimal{}, fmt.Errorf("%s is negative", raw)
	}
	return d, nil
}

// openapiDoc is the API's OpenAPI document, served at /openapi.json and
// checked against the handler by TestOpenAPI.
//
//go:embed openapi.json
var openapiDoc []byte

// jsonKind names what JSON a Go type decodes from, so a problem detail
// says "want an array", never a Go type such as []json.RawMessage.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "another JSON value"
}

// strictDecode decodes one JSON object, refusing unknown fields, trailing
// data and mistyped values, naming the field when it can.
func strictDecode(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te):
			// Field "" is the value itself: the caller names it
			return &badField{te.Field, fmt.Sprintf("want %s, got a JSON %s", jsonKind(te.Type), te.Value)}
		}
		if name, ok := strings.CutPrefix(err.Error(), `json: unknown field "`); ok {
			return &badField{strings.TrimSuffix(name, `"`), "unknown field"}
		}
		return fmt.Errorf("body: %w", err)
	}
	if dec.More() {
		return errors.New("body: data after the JSON object")
	}
	return nil
}
