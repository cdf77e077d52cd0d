package doccheck

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Pkg is one package of the repository, as go doc sees it: its exported
// declarations and their comments.
type Pkg struct {
	// Dir is the package's directory relative to the repository root,
	// slash-separated; "." for the root.
	Dir string
	// ImportPath is the module path of the nearest go.mod above Dir
	// joined with Dir's path below that module.
	ImportPath string
	Doc        *doc.Package
	// Detached lists the exported declarations whose doc comment a blank
	// line cut off, as "file:line: name" (see [Detached]).
	Detached []string
}

// Load parses every package below root: each directory holding Go files
// other than tests, nested modules included. Directories named testdata,
// vendor or node_modules and those starting with "." or "_" are skipped,
// as the go command skips them.
func Load(root string) ([]*Pkg, error) {
	var pkgs []*Pkg
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		n := d.Name()
		if p != root && (n == "testdata" || n == "vendor" || n == "node_modules" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
			return filepath.SkipDir
		}
		pkg, err := loadDir(root, p)
		if err != nil {
			return err
		}
		if pkg != nil {
			pkgs = append(pkgs, pkg)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].Dir < pkgs[j].Dir })
	return pkgs, nil
}

// loadDir parses the package in dir, or returns nil when dir has none.
func loadDir(root, dir string) (*Pkg, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	var cut []string
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		if ok, err := build.Default.MatchFile(dir, n); err != nil || !ok {
			continue // another platform's file, or one behind //go:build ignore
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		cut = append(cut, detached(fset, f)...) // before go/doc trims the AST
	}
	if len(files) == 0 {
		return nil, nil
	}
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		return nil, err
	}
	rel = filepath.ToSlash(rel)
	ip, err := importPath(root, dir)
	if err != nil {
		return nil, err
	}
	d, err := doc.NewFromFiles(fset, files, ip)
	if err != nil {
		return nil, fmt.Errorf("doccheck: %s: %w", rel, err)
	}
	return &Pkg{Dir: rel, ImportPath: ip, Doc: d, Detached: cut}, nil
}

// importPath is the import path of the package in dir: the module path
// of the nearest go.mod at or above dir (up to root) and the rest of dir.
func importPath(root, dir string) (string, error) {
	var below []string
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil {
			mod := modulePath(b)
			if mod == "" {
				return "", fmt.Errorf("doccheck: %s/go.mod names no module", d)
			}
			for i, j := 0, len(below)-1; i < j; i, j = i+1, j-1 {
				below[i], below[j] = below[j], below[i]
			}
			return path.Join(append([]string{mod}, below...)...), nil
		}
		if r, _ := filepath.Rel(root, d); r == "." || filepath.Dir(d) == d {
			return "", fmt.Errorf("doccheck: no go.mod at or above %s", dir)
		}
		below = append(below, filepath.Base(d))
	}
}

// modulePath is the path on the module line of a go.mod file.
func modulePath(gomod []byte) string {
	for _, l := range strings.Split(string(gomod), "\n") {
		l = strings.TrimSpace(l)
		if rest, ok := strings.CutPrefix(l, "module"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
			rest = strings.TrimSpace(rest)
			if u, err := strconv.Unquote(rest); err == nil {
				return u
			}
			return rest
		}
	}
	return ""
}
