//go:build ignore

// Command exportcount prints, for each package directory given, the number of
// exported identifiers in its non-test files: package-level funcs, types,
// vars and consts, plus the exported methods and struct fields of exported
// types. It is the measure the API review uses; run it through
// scripts/exported-count.sh.
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"sort"
	"strings"
)

func main() {
	for _, dir := range os.Args[1:] {
		top, methods, fields, err := count(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("%-45s %4d top-level  %4d methods  %4d fields  %4d total\n", dir, top, methods, fields, top+methods+fields)
	}
}

func count(dir string) (top, methods, fields int, err error) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		return 0, 0, 0, err
	}
	names := make([]string, 0, len(pkgs))
	for n := range pkgs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, f := range pkgs[n].Files {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if !d.Name.IsExported() {
						continue
					}
					if d.Recv == nil {
						top++
					} else if recvExported(d.Recv) {
						methods++
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if !s.Name.IsExported() {
								continue
							}
							top++
							fields += exportedMembers(s.Type)
						case *ast.ValueSpec:
							for _, id := range s.Names {
								if id.IsExported() {
									top++
								}
							}
						}
					}
				}
			}
		}
	}
	return top, methods, fields, nil
}

func recvExported(r *ast.FieldList) bool {
	t := r.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.Ident:
		return x.IsExported()
	case *ast.IndexExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			return id.IsExported()
		}
	case *ast.IndexListExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			return id.IsExported()
		}
	}
	return false
}

// exportedMembers counts the exported fields of a struct type and the
// exported methods of an interface type.
func exportedMembers(t ast.Expr) int {
	var list *ast.FieldList
	switch x := t.(type) {
	case *ast.StructType:
		list = x.Fields
	case *ast.InterfaceType:
		list = x.Methods
	default:
		return 0
	}
	n := 0
	for _, f := range list.List {
		for _, id := range f.Names {
			if id.IsExported() {
				n++
			}
		}
		if len(f.Names) == 0 { // embedded
			e := f.Type
			if s, ok := e.(*ast.StarExpr); ok {
				e = s.X
			}
			if id, ok := e.(*ast.Ident); ok && id.IsExported() {
				n++
			}
		}
	}
	return n
}
