package main

import (
	"encoding/json"
	"io"
)

// output is where a listing or status command prints: text for a person,
// or with -json one JSON document (internal/opsview's field names).
type output struct {
	w    io.Writer
	json bool
}

// encode prints v as indented JSON and a newline.
func (o output) encode(v any) error {
	enc := json.NewEncoder(o.w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
