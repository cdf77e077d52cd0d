// Package examples holds the repository's sample rules file, embedded so
// that `tierset demo` and `tierset match` work outside a checkout (after
// `go install`).
package examples

import _ "embed"

// Rules is rules.json: the sample promotions.
//
//go:embed rules.json
var Rules []byte

// RulesName names Rules in messages.
const RulesName = "examples/rules.json (built in)"
