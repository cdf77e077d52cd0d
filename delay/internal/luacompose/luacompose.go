// Package luacompose builds the delay package's Redis scripts from the
// one list of them, [Scripts]: each script is the part of lua/lib.lua it
// uses followed by its own body, written to lua/gen/<name>.lua, and
// scripts_gen.go declares its *redis.Script. The generator
// (internal/luagen, run by go generate ./delay) writes [Generate]'s
// files; delay's tests generate them again to prove the checked-in ones
// current.
package luacompose

import (
	"bytes"
	"errors"
	"fmt"
	"go/format"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
)

var (
	// ErrLayout: a lib line after the first function is neither inside a
	// function nor blank nor a comment. compose cuts lib at its functions,
	// so such a line would silently join the function before it.
	ErrLayout = errors.New("luacompose: lib line outside a function")
)

// Script is one script of the delay package: the body lua/<Name>.lua,
// written composed to lua/gen/<Name>.lua and run through the Go variable
// [Script.GoName].
type Script struct {
	Name string
	// Doc, when set, is said of the script's Go variable: why it exists
	// beside a similar one.
	Doc string
	// Once marks a mutating script: its body runs under rp_run
	// (reply.lua), so a call re-sent after its reply was lost returns the
	// first run's reply.
	Once bool
	// Keep and Grow, when set, name the functions (reply.lua,
	// take_kept.lua) that store a bulk reply more cheaply than the
	// generic encoding and read it back.
	Keep, Grow string
	// Inline names another script whose body (after its header) this
	// one calls as the local function <Inline>_body, so that a script
	// that adds a step around another runs that script's very code
	// rather than a copy (enqueue_tick around enqueue).
	Inline string
}

// Scripts is every script the delay package runs: the one place a
// script is declared. The composed files, the Go variables and the
// package's table of scripts (scripts_gen.go) are generated from it, and
// the tests iterate it. A new script is a body lua/<name>.lua, a line
// here, and go generate ./delay.
func Scripts() []Script {
	return []Script{
		{Name: "enqueue_batch", Once: true, Keep: "rp_ints", Grow: "rp_unints",
			Doc: "the multi-job enqueue that EnqueueBatch pipelines (and that Sharded loads before its pipelines)"},
		{Name: "enqueue", Once: true,
			Doc: "the leaner one-job enqueue behind Enqueue, which costs the server less per call than a one-job batch (its Lua sets up fewer tables and closures)"},
		{Name: "take", Once: true, Keep: "take_keep", Grow: "take_grow"},
		{Name: "ack", Once: true, Keep: "rp_codes", Grow: "rp_uncodes"},
		{Name: "ack_done", Once: true, Keep: "rp_codes", Grow: "rp_uncodes"},
		{Name: "release", Once: true, Keep: "rp_codes", Grow: "rp_uncodes"},
		{Name: "retry", Once: true},
		{Name: "kill", Once: true},
		{Name: "extend", Once: true},
		{Name: "sweep", Once: true},
		{Name: "cancel", Once: true},
		{Name: "reschedule", Once: true},
		{Name: "cancel_ids", Once: true},
		{Name: "reschedule_ids", Once: true},
		{Name: "requeue", Once: true},
		{Name: "purge", Once: true},
		{Name: "remove", Once: true},
		{Name: "repair", Once: true},
		{Name: "pause", Once: true},
		{Name: "rate", Once: true},
		{Name: "stats"},
		{Name: "lookup"},
		{Name: "enqueue_tick", Once: true, Inline: "enqueue",
			Doc: "one tick of a periodic job: the one-job enqueue behind the job's guard, so that a tick makes at most one task ever"},
		{Name: "registry",
			Doc: "a pool's heartbeat in the worker registry, claiming its ID with an owner token"},
		{Name: "unregister"},
		{Name: "workers"},
	}
}

// libFiles are the lua/ files that are lib, not script bodies: lib.lua
// for every script, reply.lua and take_kept.lua for the mutating ones.
var libFiles = [...]string{"lib.lua", "reply.lua", "take_kept.lua"}

// Lib is the shared Lua the scripts are composed from.
type Lib struct {
	// Plain is lib.lua; Once adds reply.lua and take_kept.lua, what a
	// mutating script may call.
	Plain, Once string
}

// ReadLib reads the lib files from fsys (the lua directory) and checks
// their layout, naming the file of a misplaced line.
func ReadLib(fsys fs.FS) (Lib, error) {
	var texts [len(libFiles)]string
	for i, name := range libFiles {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return Lib{}, fmt.Errorf("luacompose: %w", err)
		}
		texts[i] = string(b)
		if _, err := cut(texts[i]); err != nil {
			return Lib{}, fmt.Errorf("%s: %w", name, err)
		}
	}
	return Lib{Plain: texts[0], Once: texts[0] + texts[1] + texts[2]}, nil
}

// Parts is one composed script: the file is GeneratedLine, Header, a
// blank line, Lib and Body in that order, and Lib+Body is the code.
type Parts struct {
	// Header is the body's leading comment (KEYS, ARGV, Returns), moved
	// to the top of the file so that it reads first.
	Header string
	// Lib is lib's prelude and the lib functions Body reaches.
	Lib string
	// Body is the body after its header, wrapped by once for a Once
	// script.
	Body string
}

// Build composes s from its body in fsys.
func (l Lib) Build(fsys fs.FS, s Script) (Parts, error) {
	b, err := fs.ReadFile(fsys, s.Name+".lua")
	if err != nil {
		return Parts{}, fmt.Errorf("luacompose: %w", err)
	}
	header, body := splitHeader(string(b))
	if s.Inline != "" {
		ib, err := fs.ReadFile(fsys, s.Inline+".lua")
		if err != nil {
			return Parts{}, fmt.Errorf("luacompose: %s: %w", s.Name, err)
		}
		_, inner := splitHeader(string(ib))
		body = "local function " + s.Inline + "_body()\n" + inner + "end\n" + body
	}
	lib := l.Plain
	if s.Once {
		lib, body = l.Once, wrapOnce(body, s.Keep, s.Grow)
	}
	sel, err := selectLib(lib, body)
	if err != nil {
		return Parts{}, fmt.Errorf("%s: %w", s.Name, err)
	}
	return Parts{Header: header, Lib: sel, Body: body}, nil
}

// GoName is the Go variable of s in package delay: "script" and Name in
// camel case (enqueue_batch is scriptEnqueueBatch).
func (s Script) GoName() string {
	var b strings.Builder
	b.WriteString("script")
	for _, w := range strings.Split(s.Name, "_") {
		if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}

// GeneratedLine is the first line of the generated file of s.
func GeneratedLine(s Script) string {
	from := "lib.lua"
	if s.Once {
		from = strings.Join(libFiles[:], " + ")
	}
	if s.Inline != "" {
		from += " + " + s.Inline + ".lua"
	}
	return "-- Code generated from " + from + " + " + s.Name + ".lua by `go generate ./delay`; DO NOT EDIT.\n"
}

// File is the generated file's content; a blank line sets the header off.
func (p Parts) File(s Script) []byte {
	return []byte(GeneratedLine(s) + p.Header + "\n" + p.Lib + p.Body)
}

// Where Generate's files go, relative to the delay package's directory.
const (
	// GenDir holds the composed scripts, one per [Script].
	GenDir = "lua/gen"
	// GoFile declares each script's *redis.Script and the table of them.
	GoFile = "scripts_gen.go"
)

// Generate composes every script of [Scripts] from the lua directory fsys
// and writes the Go file that runs them: path (relative to the delay
// package, under [GenDir] or [GoFile]) -> content.
func Generate(fsys fs.FS) (map[string][]byte, error) {
	l, err := ReadLib(fsys)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, s := range Scripts() {
		p, err := l.Build(fsys, s)
		if err != nil {
			return nil, err
		}
		out[path.Join(GenDir, s.Name+".lua")] = p.File(s)
	}
	src, err := GoSource(Scripts())
	if err != nil {
		return nil, err
	}
	out[GoFile] = src
	return out, nil
}

// comment is text as Go comment lines of at most about 72 columns.
func comment(text string) string {
	var b strings.Builder
	line := 0
	for _, w := range strings.Fields(text) {
		if line > 0 && line+1+len(w) > 72 {
			b.WriteString("\n")
			line = 0
		}
		if line == 0 {
			b.WriteString("//")
			line = 2
		}
		b.WriteString(" " + w)
		line += 1 + len(w)
	}
	return b.String() + "\n"
}

// GoSource is the Go file of package delay that embeds each composed
// script, declares its *redis.Script (named by [Script.GoName]) and lists
// them all in the table scripts, in the order of list.
func GoSource(list []Script) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("// Code generated from delay/internal/luacompose.Scripts by `go generate ./delay`; DO NOT EDIT.\n\n")
	b.WriteString("package delay\n\nimport (\n\t_ \"embed\"\n\n\t\"github.com/redis/go-redis/v9\"\n)\n")
	for _, s := range list {
		src := "lua" + s.GoName()[len("script"):]
		doc := fmt.Sprintf("%s runs %s/%s.lua, composed from lua/%s.lua", s.GoName(), GenDir, s.Name, s.Name)
		if s.Doc != "" {
			doc += ": " + s.Doc
		}
		b.WriteString("\n" + comment(doc+"."))
		fmt.Fprintf(&b, "var %s = redis.NewScript(%s)\n\n//go:embed %s/%s.lua\nvar %s string\n", s.GoName(), src, GenDir, s.Name, src)
	}
	b.WriteString("\n// scripts is every script the package runs, by the name of its body in\n// lua/, in the order of luacompose.Scripts.\n")
	b.WriteString("var scripts = [...]struct {\n\tname   string\n\tscript *redis.Script\n}{\n")
	for _, s := range list {
		fmt.Fprintf(&b, "\t{%q, %s},\n", s.Name, s.GoName())
	}
	b.WriteString("}\n")
	src, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("luacompose: %s: %w", GoFile, err)
	}
	return src, nil
}

// Bodies is the script bodies in the lua directory fsys (every .lua file
// but lib.lua, reply.lua and take_kept.lua), by name without .lua: what Scripts must list.
func Bodies(fsys fs.FS) ([]string, error) {
	ents, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("luacompose: %w", err)
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || path.Ext(n) != ".lua" || isLib(n) {
			continue
		}
		names = append(names, strings.TrimSuffix(n, ".lua"))
	}
	sort.Strings(names)
	return names, nil
}

func isLib(name string) bool {
	for _, l := range libFiles {
		if name == l {
			return true
		}
	}
	return false
}

// splitHeader cuts a body's leading comment lines from the rest.
func splitHeader(body string) (header, rest string) {
	i := 0
	for strings.HasPrefix(body[i:], "--") {
		nl := strings.IndexByte(body[i:], '\n')
		if nl < 0 {
			return body, ""
		}
		i += nl + 1
	}
	return body[:i], body[i:]
}

// Once composes a mutating script from lib (Lib.Once): body runs as the
// function rp_body under rp_run (reply.lua), which keeps its reply under
// the call's reply key. keep and grow, when not empty, name the functions
// that store a bulk reply more cheaply than the generic encoding and read
// it back; compose brings in only the ones named.
func Once(lib, body, keep, grow string) (string, error) {
	return Compose(lib, wrapOnce(body, keep, grow))
}

func wrapOnce(body, keep, grow string) string {
	tail := "return rp_run(rp_body)\n"
	if keep != "" {
		tail = "return rp_run(rp_body, " + keep + ", " + grow + ")\n"
	}
	return "local function rp_body()\n" + body + "\nend\n" + tail
}

// LibFunc matches a lib function's first line; its group is the name.
var LibFunc = regexp.MustCompile(`(?m)^local function ([A-Za-z_][A-Za-z0-9_]*)`)

// words is the set of words (runs of [0-9A-Za-z_], what \b delimits) in
// text: a name is used there when it is one of them. One scan per text,
// because a regexp per name and text made composing the scripts slow.
func words(text string) map[string]bool {
	m := map[string]bool{}
	isWord := func(c byte) bool {
		return c == '_' || c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
	}
	for i := 0; i < len(text); {
		if !isWord(text[i]) {
			i++
			continue
		}
		j := i
		for j < len(text) && isWord(text[j]) {
			j++
		}
		m[text[i:j]] = true
		i = j
	}
	return m
}

// Compose prepends to body the prelude of lib (everything before its
// first function: the header, codes and constants) and the lib functions
// body uses, directly or through other lib functions, in lib's order.
//
// Why not all of lib: a script runs its chunk from the top on every call,
// and each "local function" there allocates a closure: the whole lib cost
// about a third of a one-job enqueue's server time, so a script pays only
// for what it calls.
func Compose(lib, body string) (string, error) {
	sel, err := selectLib(lib, body)
	if err != nil {
		return "", err
	}
	return sel + body, nil
}

type chunk struct {
	name string
	text string
	uses map[string]bool // the words of text
}

// selectLib is the part of lib that Compose puts before body.
func selectLib(lib, body string) (string, error) {
	cl, err := cut(lib)
	if err != nil {
		return "", err
	}
	if len(cl.chunks) == 0 {
		return lib, nil
	}
	bodyUses := words(body)
	need := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for _, c := range cl.chunks {
			if need[c.name] {
				continue
			}
			if bodyUses[c.name] {
				need[c.name], changed = true, true
				continue
			}
			for _, d := range cl.chunks {
				if need[d.name] && d.name != c.name && d.uses[c.name] {
					need[c.name], changed = true, true
					break
				}
			}
		}
	}
	var b strings.Builder
	b.WriteString(cl.prelude)
	for _, c := range cl.chunks {
		if need[c.name] {
			b.WriteString(c.text)
		}
	}
	return b.String(), nil
}

type cutLib struct {
	prelude string
	chunks  []chunk
}

// cut splits lib into its prelude and one chunk per function, the comment
// lines directly above a function travelling with it. After the first
// function every line must be inside a function, blank or a comment: a
// function is its "local function" line when that line ends with "end",
// else it runs to the next line that is exactly "end" (the lib's layout:
// bodies are indented).
func cut(lib string) (cutLib, error) {
	lines := strings.SplitAfter(lib, "\n")
	var starts []int
	var names []string
	for i, l := range lines {
		if m := LibFunc.FindStringSubmatch(l); m != nil {
			s := i
			for s > 0 && strings.HasPrefix(lines[s-1], "--") {
				s-- // the comment above a function travels with it
			}
			starts = append(starts, s)
			names = append(names, m[1])
		}
	}
	if len(starts) == 0 {
		return cutLib{prelude: lib}, nil
	}
	if err := checkLayout(lines, starts[0]); err != nil {
		return cutLib{}, err
	}
	c := cutLib{prelude: strings.Join(lines[:starts[0]], "")}
	for k, s := range starts {
		end := len(lines)
		if k+1 < len(starts) {
			end = starts[k+1]
		}
		text := strings.Join(lines[s:end], "")
		c.chunks = append(c.chunks, chunk{names[k], text, words(text)})
	}
	return c, nil
}

// checkLayout checks lines from first (the first function's chunk) on.
func checkLayout(lines []string, first int) error {
	open := -1 // the line of the function being read, -1 between functions
	for i := first; i < len(lines); i++ {
		l := strings.TrimRight(lines[i], " \t\r\n")
		switch {
		case LibFunc.MatchString(l):
			if open >= 0 {
				return fmt.Errorf("%w: line %d starts a function before the one at line %d ends (a column-0 end line)", ErrLayout, i+1, open+1)
			}
			if !oneLine(l) {
				open = i
			}
		case open >= 0:
			if l == "end" {
				open = -1
			}
		case l == "" || strings.HasPrefix(strings.TrimLeft(l, " \t"), "--"):
		default:
			return fmt.Errorf("%w: line %d %q (after the first function, a line is inside one, blank or a comment)", ErrLayout, i+1, l)
		}
	}
	if open >= 0 {
		return fmt.Errorf("%w: the function at line %d never ends (a column-0 end line)", ErrLayout, open+1)
	}
	return nil
}

// oneLine tells whether a function's first line is the whole function.
func oneLine(l string) bool {
	if i := strings.Index(l, " --"); i >= 0 {
		l = strings.TrimRight(l[:i], " \t")
	}
	return strings.HasSuffix(l, " end")
}
