package doccheck

import (
	"go/doc"
	"go/doc/comment"
	"regexp"
	"strings"
	"unicode"
)

// linkName matches the text inside brackets that go/doc/comment would
// have made a doc link had its name resolved: Name, Recv.Name, pkg.Name,
// pkg.Recv.Name, optionally with a leading *.
var linkName = regexp.MustCompile(`^\*?(?:[a-z][A-Za-z0-9_]*\.)?(?:[A-Z][A-Za-z0-9_]*\.)?[A-Z][A-Za-z0-9_]*$`)

// bracketed matches [text] with no bracket inside.
var bracketed = regexp.MustCompile(`\[[^\[\]]*\]`)

// Unresolved lists, as "dir: where: link", every doc link in the
// comments go doc shows (the package doc and each exported declaration's)
// that resolves to nothing: a name the package does not declare, or an
// unknown package. A link to another package of the repository must
// name something that package declares.
func Unresolved(pkgs []*Pkg) []string {
	byPath := map[string]*doc.Package{}
	for _, p := range pkgs {
		byPath[p.ImportPath] = p.Doc
	}
	var out []string
	for _, p := range pkgs {
		parser := p.Doc.Parser()
		check := func(where, text string) {
			for _, l := range unresolvedIn(parser.Parse(text), byPath) {
				out = append(out, p.Dir+": "+where+": "+l)
			}
		}
		eachComment(p.Doc, check)
	}
	return out
}

// eachComment calls f with every doc comment go doc shows of d.
func eachComment(d *doc.Package, f func(where, text string)) {
	f("package doc", d.Doc)
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			f(strings.Join(v.Names, ", "), v.Doc)
		}
	}
	funcs := func(fs []*doc.Func) {
		for _, fn := range fs {
			name := fn.Name
			if fn.Recv != "" {
				name = strings.TrimPrefix(fn.Recv, "*") + "." + fn.Name
			}
			f(name, fn.Doc)
		}
	}
	values(d.Consts)
	values(d.Vars)
	funcs(d.Funcs)
	for _, t := range d.Types {
		f(t.Name, t.Doc)
		values(t.Consts)
		values(t.Vars)
		funcs(t.Funcs)
		funcs(t.Methods)
	}
}

// unresolvedIn is the unresolved links of one parsed comment.
func unresolvedIn(d *comment.Doc, byPath map[string]*doc.Package) []string {
	var out []string
	var texts func([]comment.Text)
	texts = func(ts []comment.Text) {
		for _, t := range ts {
			switch t := t.(type) {
			case comment.Plain:
				out = append(out, matches(string(t))...)
			case comment.Italic:
				out = append(out, matches(string(t))...)
			case *comment.Link:
				texts(t.Text)
			case *comment.DocLink:
				if other, ok := byPath[t.ImportPath]; ok && t.Name != "" && !other.Parser().LookupSym(t.Recv, t.Name) {
					out = append(out, "["+t.ImportPath+"."+strings.TrimPrefix(t.Recv+"."+t.Name, ".")+"] (not declared there)")
				}
				texts(t.Text)
			}
		}
	}
	var blocks func([]comment.Block)
	blocks = func(bs []comment.Block) {
		for _, b := range bs {
			switch b := b.(type) {
			case *comment.Paragraph:
				texts(b.Text)
			case *comment.Heading:
				texts(b.Text)
			case *comment.List:
				for _, it := range b.Items {
					blocks(it.Content)
				}
			}
		}
	}
	blocks(d.Content)
	return out
}

// matches is the bracketed names in plain text s that stand where a doc
// link may (after a space or punctuation, before one). A resolved link is
// a DocLink, never plain text, so such a name left in plain text is what
// go doc prints with its brackets.
func matches(s string) []string {
	var out []string
	for _, ix := range bracketed.FindAllStringIndex(s, -1) {
		in := s[ix[0]+1 : ix[1]-1]
		if !linkName.MatchString(in) {
			continue
		}
		if ix[0] > 0 && !linkEdge(rune(s[ix[0]-1])) || ix[1] < len(s) && !linkEdge(rune(s[ix[1]])) {
			continue
		}
		out = append(out, "["+in+"]")
	}
	return out
}

// linkEdge is what may stand beside a doc link (go/doc/comment's rule,
// for the ASCII bytes around brackets).
func linkEdge(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r < 0x80 && unicode.IsPunct(r)
}

// Detached lists, as "dir/file:line: name", every exported top-level
// declaration whose doc comment is separated from it by a blank line, so
// that go doc shows neither.
func Detached(pkgs []*Pkg) []string {
	var out []string
	for _, p := range pkgs {
		for _, d := range p.Detached {
			out = append(out, p.Dir+"/"+d)
		}
	}
	return out
}
