package main

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestOpenAPI sends requests of every documented kind and checks each
// answer against openapi.json: the path and method are documented, the
// status is one of the operation's responses, the content type is that
// response's, and the body satisfies its schema (required members,
// types, enums, no member a closed object lacks). Every documented
// (path, method, status) must be met at least once, so the document
// cannot list an answer the handler never gives.
func TestOpenAPI(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(openapiDoc, &doc); err != nil {
		t.Fatal(err)
	}
	c, srv, rc := warmedCache(t)
	h := newServer(c, serverOptions{MinorDigits: 2, Ready: func(ctx context.Context) error { return rc.Ping(ctx).Err() }})
	paths := doc["paths"].(map[string]any)
	seen := map[string]bool{}
	check := func(method, path, body string) {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
		ct, _, _ := mime.ParseMediaType(rec.Header().Get("Content-Type"))
		var got any
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Errorf("%s %s: %d, body is not JSON: %q", method, path, rec.Code, rec.Body.String())
			return
		}
		ops, _ := paths[path].(map[string]any)
		op, _ := ops[strings.ToLower(method)].(map[string]any)
		if op == nil {
			// Undocumented path or method: a problem document, 404 or 405.
			if (rec.Code != http.StatusNotFound && rec.Code != http.StatusMethodNotAllowed) || ct != "application/problem+json" {
				t.Errorf("%s %s (not in the document): %d %s", method, path, rec.Code, ct)
			}
			validate(t, doc, method+" "+path, map[string]any{"$ref": "#/components/schemas/Problem"}, got)
			return
		}
		resp, _ := op["responses"].(map[string]any)[strconv.Itoa(rec.Code)].(map[string]any)
		if resp == nil {
			t.Errorf("%s %s: status %d is not documented (body %s)", method, path, rec.Code, rec.Body.String())
			return
		}
		seen[path+" "+method+" "+strconv.Itoa(rec.Code)] = true
		media, _ := resp["content"].(map[string]any)[ct].(map[string]any)
		if media == nil {
			t.Errorf("%s %s: %d answered %s, not a documented content type", method, path, rec.Code, ct)
			return
		}
		validate(t, doc, fmt.Sprintf("%s %s %d", method, path, rec.Code), media["schema"], got)
	}
	line := func(promo, qty, base string) string {
		return `{"promotion": "` + promo + `", "quantity": ` + qty + `, "base": "` + base + `"}`
	}
	check("POST", "/v1/cart/price", `{"lines": [`+line("qty-3-5-10", "7", "70.00")+`, `+line("qty-3-5-10", "1", "10.00")+`, `+line("missing", "3", "1")+`]}`)
	check("POST", "/v1/cart/price", `{"lines": [`+line("qty-3-5-10", "7", "70.00")+`], "coupon": 1}`)
	check("POST", "/v1/cart/price", `{"lines": nope}`)
	check("POST", "/v1/cart/price", `{"lines": [{"promotion": "p", "quantity": 1, "base": "`+strings.Repeat("9", maxBodyBytes)+`"}]}`)
	check("GET", "/v1/cart/price", "")
	check("GET", "/healthz", "")
	check("DELETE", "/healthz", "")
	check("GET", "/openapi.json", "")
	check("GET", "/readyz", "")
	check("PUT", "/readyz", "")
	check("GET", "/nope", "")
	srv.Kill()
	check("POST", "/v1/cart/price", `{"lines": [`+line("qty-3-5-10", "7", "70.00")+`]}`)
	check("GET", "/readyz", "")

	var missing []string
	for p, ops := range paths {
		for m, op := range ops.(map[string]any) {
			for code := range op.(map[string]any)["responses"].(map[string]any) {
				if k := p + " " + strings.ToUpper(m) + " " + code; !seen[k] {
					missing = append(missing, k)
				}
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("documented answers the test never met: %v", missing)
	}
}

// validate checks v against an OpenAPI schema: $ref, type, required,
// properties, additionalProperties false, items, enum and oneOf.
func validate(t errorer, doc map[string]any, at string, schema, v any) {
	t.Helper()
	s := schema.(map[string]any)
	if ref, ok := s["$ref"].(string); ok {
		s = doc
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			s = s[part].(map[string]any)
		}
	}
	if alts, ok := s["oneOf"].([]any); ok {
		for _, a := range alts {
			r := &recorder{}
			if validate(r, doc, at, a, v); !r.failed {
				return
			}
		}
		t.Errorf("%s: %v matches no alternative", at, v)
		return
	}
	if enum, ok := s["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			found = found || e == v
		}
		if !found {
			t.Errorf("%s: %v is not one of %v", at, v, enum)
		}
	}
	switch s["type"] {
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			t.Errorf("%s: %v is not an object", at, v)
			return
		}
		for _, r := range asList(s["required"]) {
			if _, ok := obj[r.(string)]; !ok {
				t.Errorf("%s: required member %q missing in %v", at, r, obj)
			}
		}
		props, _ := s["properties"].(map[string]any)
		for k, mv := range obj {
			ps, ok := props[k]
			if !ok {
				if s["additionalProperties"] == false {
					t.Errorf("%s: member %q is not in the schema", at, k)
				}
				continue
			}
			validate(t, doc, at+"."+k, ps, mv)
		}
	case "array":
		arr, ok := v.([]any)
		if !ok {
			t.Errorf("%s: %v is not an array", at, v)
			return
		}
		for i, e := range arr {
			validate(t, doc, fmt.Sprintf("%s[%d]", at, i), s["items"], e)
		}
	case "string":
		if _, ok := v.(string); !ok {
			t.Errorf("%s: %v is not a string", at, v)
		}
	case "integer":
		if f, ok := v.(float64); !ok || f != float64(int64(f)) {
			t.Errorf("%s: %v is not an integer", at, v)
		}
	case "number":
		if _, ok := v.(float64); !ok {
			t.Errorf("%s: %v is not a number", at, v)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			t.Errorf("%s: %v is not a boolean", at, v)
		}
	}
}

// errorer is what validate reports to: a *testing.T, or a recorder that
// tries one alternative of a oneOf.
type errorer interface {
	Helper()
	Errorf(format string, args ...any)
}

type recorder struct{ failed bool }

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
