package doccheck

import (
	"go/doc/comment"
	"sort"
	"strings"
)

// MapHeading is the heading of the package map in the root package's
// doc: the one list of the repository's packages.
const MapHeading = "Package map"

// MapErrors compares the package map in the root package's doc (the
// lists after the heading [MapHeading]) with pkgs: each list item names
// one or more packages (a doc link to its import path, or its directory,
// several separated by ", ", before the first ":"), and every package but
// the root must be named exactly once.
func MapErrors(pkgs []*Pkg) []string {
	var root *Pkg
	dirs := map[string]bool{}
	byImport := map[string]string{}
	for _, p := range pkgs {
		if p.Dir == "." {
			root = p
			continue
		}
		dirs[p.Dir] = true
		byImport[p.ImportPath] = p.Dir
	}
	if root == nil {
		return []string{"no root package"}
	}
	listed := map[string]int{}
	var errs []string
	in := false
	for _, b := range root.Doc.Parser().Parse(root.Doc.Doc).Content {
		switch b := b.(type) {
		case *comment.Heading:
			in = plain(b.Text) == MapHeading
		case *comment.List:
			if !in {
				continue
			}
			for _, it := range b.Items {
				p, ok := it.Content[0].(*comment.Paragraph)
				if !ok {
					continue
				}
				for _, name := range itemNames(p.Text) {
					if d, ok := byImport[name]; ok {
						name = d
					}
					listed[name]++
				}
			}
		}
	}
	if len(listed) == 0 {
		return []string{"the root package doc has no list under the heading # " + MapHeading}
	}
	for d := range dirs {
		if listed[d] == 0 {
			errs = append(errs, d+" is not in the package map (root doc.go)")
		}
	}
	for d, n := range listed {
		switch {
		case !dirs[d]:
			errs = append(errs, d+" is in the package map (root doc.go) but is no package")
		case n > 1:
			errs = append(errs, d+" is in the package map more than once")
		}
	}
	sort.Strings(errs)
	return errs
}

// itemNames is the packages a map item names before its first ":".
func itemNames(ts []comment.Text) []string {
	var head strings.Builder
	for _, t := range ts {
		switch t := t.(type) {
		case *comment.DocLink:
			head.WriteString(t.ImportPath)
		case comment.Plain:
			s := string(t)
			if i := strings.IndexByte(s, ':'); i >= 0 {
				head.WriteString(s[:i])
				return split(head.String())
			}
			head.WriteString(s)
		default:
			return split(head.String())
		}
	}
	return split(head.String())
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// plain is the text of ts without markup.
func plain(ts []comment.Text) string {
	var b strings.Builder
	for _, t := range ts {
		switch t := t.(type) {
		case comment.Plain:
			b.WriteString(string(t))
		case comment.Italic:
			b.WriteString(string(t))
		case *comment.Link:
			b.WriteString(plain(t.Text))
		case *comment.DocLink:
			b.WriteString(plain(t.Text))
		}
	}
	return b.String()
}
