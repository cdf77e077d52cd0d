// Package doccheck checks what go doc shows of the repository, from its
// tests: every doc link (a name in square brackets) resolves, where an
// unresolved one is printed with its brackets, and the package map in
// the root package's doc lists every package, nested modules included.
//
// Use it from a test:
//
//	pkgs, err := doccheck.Load("../..")
//	for _, l := range doccheck.Unresolved(pkgs) { t.Error(l) }
//	for _, e := range doccheck.MapErrors(pkgs) { t.Error(e) }
//
// It reads source only (go/parser, go/doc, go/doc/comment), so it covers
// the nested modules without building them.
package doccheck
