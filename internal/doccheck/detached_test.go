package doccheck

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestDetachedFinds: the check reports a doc comment a blank line cut
// off, and nothing for an attached one, a group, a directive or an
// unexported name.
func TestDetachedFinds(t *testing.T) {
	t.Parallel()
	src := `// Package p is a test.
package p

// Cut is documented, but a blank line cuts the comment off.

func Cut() {}

// Kept is documented.
func Kept() {}

// Names of things.

const (
	A = 1
)

//go:generate true

func Generated() {}

// hidden is unexported.

func hidden() {}

// CutType says what it is.

type CutType int
`
	name := filepath.Join(t.TempDir(), "p.go")
	if err := os.WriteFile(name, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	got := detached(fset, f)
	want := []string{"p.go:6: Cut", "p.go:27: CutType"}
	if !slices.Equal(got, want) {
		t.Fatalf("detached = %q, want %q", got, want)
	}
}
