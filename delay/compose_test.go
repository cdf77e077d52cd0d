package delay

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/tierset/tierset/delay/internal/luacompose"
)

// luaDir is the script sources: tests run in the package directory.
var luaDir = os.DirFS("lua")

func readLib(t *testing.T) luacompose.Lib {
	t.Helper()
	l, err := luacompose.ReadLib(luaDir)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// testOnce composes body the way a mutating script is (Script.Once).
func testOnce(t *testing.T, body, keep, grow string) string {
	t.Helper()
	src, err := luacompose.Once(readLib(t).Once, body, keep, grow)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// TestGeneratedScriptsCurrent: lua/gen and scripts_gen.go hold exactly
// what generating from the sources and luacompose.Scripts gives now, so
// the Lua and Go checked in are what runs.
func TestGeneratedScriptsCurrent(t *testing.T) {
	t.Parallel()
	want, err := luacompose.Generate(luaDir)
	if err != nil {
		t.Fatal(err)
	}
	have, err := filepath.Glob(filepath.Join(filepath.FromSlash(luacompose.GenDir), "*.lua"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range have {
		if _, ok := want[filepath.ToSlash(p)]; !ok {
			t.Errorf("%s is no script's: run go generate ./delay", p)
		}
	}
	if _, ok := want[luacompose.GoFile]; !ok {
		t.Errorf("luacompose.Generate wrote no %s", luacompose.GoFile)
	}
	for name, b := range want {
		got, err := os.ReadFile(filepath.FromSlash(name))
		if err != nil {
			t.Errorf("%v: run go generate ./delay", err)
			continue
		}
		if !bytes.Equal(got, b) {
			t.Errorf("%s is stale (its sources changed): run go generate ./delay", name)
		}
	}
}

// TestScriptsRunGenerated: the package's table of scripts is
// luacompose.Scripts, in order, each running its generated file, and
// every body in lua/ is listed there.
func TestScriptsRunGenerated(t *testing.T) {
	t.Parallel()
	gen, err := luacompose.Generate(luaDir)
	if err != nil {
		t.Fatal(err)
	}
	list := luacompose.Scripts()
	if len(scripts) != len(list) {
		t.Fatalf("the package has %d scripts, luacompose.Scripts lists %d: run go generate ./delay", len(scripts), len(list))
	}
	var listed []string
	for i, s := range list {
		listed = append(listed, s.Name)
		if scripts[i].name != s.Name {
			t.Errorf("scripts[%d] is %s, luacompose.Scripts lists %s", i, scripts[i].name, s.Name)
		}
		sum := sha1.Sum(gen[luacompose.GenDir+"/"+s.Name+".lua"])
		if scripts[i].script.Hash() != hex.EncodeToString(sum[:]) {
			t.Errorf("script %s does not run %s/%s.lua as generated", s.Name, luacompose.GenDir, s.Name)
		}
	}
	bodies, err := luacompose.Bodies(luaDir)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(listed)
	if strings.Join(bodies, " ") != strings.Join(listed, " ") {
		t.Errorf("bodies in lua/: %v\nscripts listed: %v", bodies, listed)
	}
}

// compose keeps, for each script, exactly the lib functions it reaches:
// every lib function the composed text calls is defined in it, before the
// body, and a script that calls nothing of the lib gets only the prelude.
// Each generated file starts with the generated line and then the body's
// KEYS/ARGV/Returns header.
func TestComposeKeepsWhatScriptsUse(t *testing.T) {
	t.Parallel()
	lib := readLib(t)
	var defined []string
	for _, m := range luacompose.LibFunc.FindAllStringSubmatch(lib.Once, -1) {
		defined = append(defined, m[1])
	}
	if len(defined) < 20 {
		t.Fatalf("found %d lib functions", len(defined))
	}
	scripts := luacompose.Scripts()
	if len(scripts) < 20 {
		t.Fatalf("found %d scripts", len(scripts))
	}
	for _, s := range scripts {
		p, err := lib.Build(luaDir, s)
		if err != nil {
			t.Fatal(err)
		}
		src := p.Lib + p.Body
		for _, fn := range defined {
			called := regexp.MustCompile(`\b`+fn+`\b`).MatchString(p.Body) ||
				regexp.MustCompile(`\b`+fn+`\(`).MatchString(src)
			has := strings.Contains(p.Lib, "local function "+fn+"(")
			if called && !has {
				t.Errorf("%s uses %s but its composed lib lacks it", s.Name, fn)
			}
			if has && !regexp.MustCompile(`\b`+fn+`\b`).MatchString(strings.Replace(src, "local function "+fn+"(", "", 1)) {
				t.Errorf("%s carries %s, which nothing uses", s.Name, fn)
			}
		}
		if !strings.Contains(p.Lib, "local C_OK") {
			t.Errorf("%s lost the prelude", s.Name)
		}
		file := string(p.File(s))
		first, rest, _ := strings.Cut(file, "\n")
		if !strings.HasPrefix(first, "-- Code generated ") || !strings.HasSuffix(first, "DO NOT EDIT.") {
			t.Errorf("%s: first line %q is not the generated line", s.Name, first)
		}
		if !strings.HasPrefix(rest, "-- "+s.Name+".lua: ") || !strings.HasPrefix(rest, p.Header) ||
			!strings.Contains(p.Header, "Returns") || !strings.Contains(p.Header, "KEYS[") && !strings.Contains(p.Header, "ARGV[") {
			t.Errorf("%s: the generated line is not followed by the body's KEYS/ARGV/Returns header:\n%.400s", s.Name, rest)
		}
	}
	got, err := luacompose.Compose(lib.Plain, "return 1")
	if err != nil || strings.Contains(got, "local function") {
		t.Errorf("a body that uses nothing got lib functions (%v):\n%s", err, got)
	}
}

// TestLibConstantsMatchGo: lib.lua's return codes (C_*), record flags
// (F_*), DIGEST_LEN and HIGH_WATER_WINDOW_MS are the Go constants' (code*,
// flag*, digestLen, highWaterWindowMs),
// each side with nothing the other lacks.
func TestLibConstantsMatchGo(t *testing.T) {
	t.Parallel()
	// The package's constants by value; the scan below finds them by name
	// in the source, so one missing here fails too.
	goVals := map[string]int64{
		"codeOK": codeOK, "codeDup": codeDup, "codeNotFound": codeNotFound,
		"codeLeaseLost": codeLeaseLost, "codeBeforeEpoch": codeBeforeEpoch, "codeRange": codeRange,
		"codeTooMany": codeTooMany, "codeSeq": codeSeq, "codeCorrupt": codeCorrupt,
		"codeCancelled": codeCancelled, "codeDead": codeDead, "codeCtrLost": codeCtrLost,
		"codeIdxLost": codeIdxLost, "codeRestored": codeRestored, "codePaused": codePaused,
		"flagCancelled": flagCancelled, "flagSole": flagSole, "flagDone": flagDone,
		"digestLen": digestLen, "highWaterWindowMs": highWaterWindowMs,
		"errsKept": errsKept, "errsBytes": errsBytes, "errMark": errMark,
	}
	goNames := goConstNames(t, regexp.MustCompile(`^(code|flag)[A-Z]|^digestLen$|^highWaterWindowMs$|^errsKept$|^errsBytes$|^errMark$`))
	for _, n := range goNames {
		if _, ok := goVals[n]; !ok {
			t.Errorf("Go constant %s is missing from this test's table", n)
		}
	}
	if len(goNames) != len(goVals) {
		t.Errorf("found Go constants %v, the table has %d", goNames, len(goVals))
	}
	want := map[string]int64{}
	for n, v := range goVals {
		want[luaName(n)] = v
	}

	lib := readLib(t).Plain
	got := map[string]int64{}
	decl := regexp.MustCompile(`(?m)^local ([A-Z][A-Z0-9_]*(?:, *[A-Z][A-Z0-9_]*)*) *= *(.*)$`)
	for _, m := range decl.FindAllStringSubmatch(lib, -1) {
		names := strings.Split(m[1], ",")
		vals := strings.Split(strings.TrimSpace(strings.SplitN(m[2], "--", 2)[0]), ",")
		for i, n := range names {
			n = strings.TrimSpace(n)
			if !strings.HasPrefix(n, "C_") && !strings.HasPrefix(n, "F_") && !strings.HasPrefix(n, "ERRS_") &&
				n != "DIGEST_LEN" && n != "HIGH_WATER_WINDOW_MS" && n != "ERR_MARK" {
				continue
			}
			if i >= len(vals) {
				t.Errorf("lib.lua: %s has no value in %q", n, m[0])
				continue
			}
			val := strings.TrimSpace(vals[i])
			if n == "ERR_MARK" { // a one-byte string in Lua's decimal escape
				val = strings.TrimPrefix(strings.Trim(val, "'"), `\`)
			}
			v, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				t.Errorf("lib.lua: %s = %q is not an integer", n, vals[i])
				continue
			}
			got[n] = v
		}
	}
	if len(got) < 15 {
		t.Fatalf("read only %v from lib.lua", got)
	}
	for n, v := range got {
		if w, ok := want[n]; !ok {
			t.Errorf("lib.lua's %s = %d has no Go constant", n, v)
		} else if w != v {
			t.Errorf("lib.lua's %s = %d, the Go constant is %d", n, v, w)
		}
	}
	for n, v := range want {
		if _, ok := got[n]; !ok {
			t.Errorf("Go's %s (%d) is not declared in lib.lua", n, v)
		}
	}
}

// goConstNames is the package's (non-test) constants whose name matches re.
func goConstNames(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, sp := range g.Specs {
				for _, id := range sp.(*ast.ValueSpec).Names {
					if re.MatchString(id.Name) {
						out = append(out, id.Name)
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// luaName is lib.lua's name of a Go constant: codeNotFound is C_NOT_FOUND,
// flagSole F_SOLE, digestLen DIGEST_LEN.
func luaName(goName string) string {
	prefix, rest := "", goName
	switch {
	case strings.HasPrefix(goName, "code"):
		prefix, rest = "C_", goName[len("code"):]
	case strings.HasPrefix(goName, "flag"):
		prefix, rest = "F_", goName[len("flag"):]
	}
	var b strings.Builder
	for i, r := range rest {
		if i > 0 && unicode.IsUpper(r) && unicode.IsLower(rune(rest[i-1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return prefix + b.String()
}
