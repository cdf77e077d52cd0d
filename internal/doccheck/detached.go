package doccheck

import (
	"fmt"
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"strings"
)

// detached lists, as "file:line: name", every exported top-level
// declaration of f that has no doc comment while a comment ends on the
// line just above a blank line before it: a doc comment cut off from its
// declaration by a blank line, which go doc then shows nowhere. A comment
// that starts with the declaration's name is always meant as its doc;
// other comments are reported too, since an exported declaration should
// have one.
func detached(fset *token.FileSet, f *ast.File) []string {
	// The comment group that ends on each line.
	endsOn := map[int]*ast.CommentGroup{}
	for _, g := range f.Comments {
		endsOn[fset.Position(g.End()).Line] = g
	}
	src, err := os.ReadFile(fset.Position(f.Package).Filename)
	if err != nil {
		return []string{err.Error()}
	}
	lines := strings.Split(string(src), "\n")
	var out []string
	check := func(name string, doc *ast.CommentGroup, pos token.Pos) {
		if !ast.IsExported(name) || doc != nil {
			return
		}
		p := fset.Position(pos)
		g := endsOn[p.Line-2]
		if g == nil || g == f.Doc || strings.TrimSpace(lines[p.Line-2]) != "" || isDirective(g) {
			return
		}
		out = append(out, fmt.Sprintf("%s:%d: %s", filepath.Base(p.Filename), p.Line, name))
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				check(d.Name.Name, d.Doc, d.Pos())
			}
		case *ast.GenDecl:
			if d.Lparen.IsValid() || len(d.Specs) != 1 {
				continue // a group's doc may describe the group
			}
			switch s := d.Specs[0].(type) {
			case *ast.TypeSpec:
				check(s.Name.Name, d.Doc, d.Pos())
			case *ast.ValueSpec:
				check(s.Names[0].Name, d.Doc, d.Pos())
			}
		}
	}
	return out
}

// isDirective reports a comment group of //go: or //line directives
// (build constraints and the like), which are not doc comments.
func isDirective(g *ast.CommentGroup) bool {
	for _, c := range g.List {
		if !strings.HasPrefix(c.Text, "//go:") && !strings.HasPrefix(c.Text, "//line ") {
			return false
		}
	}
	return true
}
