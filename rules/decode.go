package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tierset/tierset/internal/text"
)

// lineCol turns a byte offset into a 1-based line and column (in bytes).
func lineCol(data []byte, off int64) (int, int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off < 0 {
		off = 0
	}
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - (bytes.LastIndexByte(before, '\n') + 1)
	if col < 1 {
		col = 1
	}
	return line, col
}

// strict decodes raw into v, refusing unknown fields and trailing data,
// and reports failures at a with field names prefixed by prefix.
func (p *parser) strict(a at, prefix string, raw []byte, v any) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		return true
	}
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te):
		field := joinField(prefix, te.Field)
		if field == "" {
			p.add(a.err(prefix, ErrType, "%s: expected %s, got %s", orValue(prefix), jsonType(te.Type.String()), shortRaw([]byte(te.Value))))
		} else {
			p.add(a.err(field, ErrType, "%s: expected %s, got %s", field, jsonType(te.Type.String()), shortRaw([]byte(te.Value))))
		}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		f, uerr := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		if uerr != nil {
			f = strings.TrimPrefix(err.Error(), "json: unknown field ")
		}
		field := joinField(prefix, f)
		p.add(a.err(field, ErrUnknownField, "unknown field %s", text.Quote(field)))
	default:
		p.add(a.err(prefix, fmt.Errorf("%w: %w", ErrType, err), "%s: %v", orValue(prefix), err))
	}
	return false
}

func orValue(prefix string) string {
	if prefix == "" {
		return "value"
	}
	return prefix
}

func joinField(prefix, f string) string {
	switch {
	case prefix == "":
		return f
	case f == "":
		return prefix
	}
	return prefix + "." + f
}

// jsonType names a Go type as the JSON type it expects.
func jsonType(goType string) string {
	switch {
	case goType == "string":
		return "a string"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "*int"):
		return "an integer"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "rules."), strings.HasPrefix(goType, "map"):
		return "an object"
	}
	return goType
}

// peekID reads a promotion's or tier's "id" leniently, so errors about
// the rest of it (unknown fields, wrong types) can still name it.
func peekID(raw []byte) string {
	var v struct {
		ID any `json:"id"`
	}
	if json.Unmarshal(raw, &v) != nil {
		return ""
	}
	s, _ := v.ID.(string)
	return s
}
