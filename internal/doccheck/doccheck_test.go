package doccheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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

// maxDocLines bounds a package's doc.go: it says how to use the package;
// the details live in docs/.
const maxDocLines = 120

// TestDocLength: every doc.go of the repository, nested modules included,
// is at most maxDocLines lines.
func TestDocLength(t *testing.T) {
	t.Parallel()
	err := filepath.WalkDir(repo, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != repo {
			return filepath.SkipDir
		}
		if d.Name() != "doc.go" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if n := strings.Count(string(b), "\n"); n > maxDocLines {
			t.Errorf("%s has %d lines, more than %d: move details to docs/", path, n, maxDocLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// readRepo reads a file of the repository, by its path from the root.
func readRepo(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
