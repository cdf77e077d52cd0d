package doccheck

import (
	"testing"
)

// repo is the repository root: tests run in the package directory.
const repo = "../.."

func load(t *testing.T) []*Pkg {
	t.Helper()
	pkgs, err := Load(repo)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 30 {
		t.Fatalf("found %d packages, want the whole repository", len(pkgs))
	}
	return pkgs
}

// TestDocLinksResolve: no doc comment go doc shows holds a [Name] that
// resolves to nothing (go doc would print it with its brackets).
func TestDocLinksResolve(t *testing.T) {
	t.Parallel()
	for _, l := range Unresolved(load(t)) {
		t.Errorf("unresolved doc link: %s", l)
	}
}

// TestPackageMapComplete: the root package doc's package map names every
// package of the repository once, nested modules included, and nothing
// else.
func TestPackageMapComplete(t *testing.T) {
	t.Parallel()
	for _, e := range MapErrors(load(t)) {
		t.Error(e)
	}
}

// TestDocCommentsAttached: no exported declaration has its doc comment
// cut off by a blank line (go doc would show neither the comment nor a
// doc for the declaration).
func TestDocCommentsAttached(t *testing.T) {
	t.Parallel()
	for _, d := range Detached(load(t)) {
		t.Errorf("doc comment separated from its declaration by a blank line: %s", d)
	}
}
