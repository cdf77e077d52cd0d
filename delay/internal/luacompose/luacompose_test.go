package luacompose

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"
)

const prelude = "-- lib\nlocal C_OK = 0\n\n"

// TestComposeSelects: the prelude, then the functions the body reaches,
// directly or through another function, in lib's order, each with the
// comment above it; the others are left out.
func TestComposeSelects(t *testing.T) {
	t.Parallel()
	lib := prelude +
		"-- a is called by b\nlocal function a() return 1 end\n\n" +
		"local function unused() return 2 end\n" +
		"-- b calls a\nlocal function b()\n  return a() + 1\nend\n"
	got, err := Compose(lib, "return b()\n")
	if err != nil {
		t.Fatal(err)
	}
	want := prelude +
		"-- a is called by b\nlocal function a() return 1 end\n\n" +
		"-- b calls a\nlocal function b()\n  return a() + 1\nend\n" +
		"return b()\n"
	if got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}

// TestComposeRefusesStrayLines: after the first function, a line that is
// in no function and is not blank or a comment is an error, where cutting
// lib at its functions would have made it part of the function above.
func TestComposeRefusesStrayLines(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, lib string
		bad       bool
	}{
		{"blanks and comments between functions", prelude +
			"local function a() return 1 end\n\n-- note\n  -- indented note\n\nlocal function b()\n  return 2\nend\n-- end of lib\n", false},
		{"one-liner with a trailing comment", prelude + "local function a() return 1 end -- short\n", false},
		{"constant between functions", prelude +
			"local function a() return 1 end\nlocal X = 5\nlocal function b() return X end\n", true},
		{"constant after a multi-line function", prelude +
			"local function a()\n  return 1\nend\nlocal X = 5\n", true},
		{"indented code after a one-liner", prelude + "local function a() return 1 end\n  x = 1\n", true},
		{"function never ends", prelude + "local function a()\n  return 1\n", true},
		{"function starts inside another", prelude +
			"local function a()\n  return 1\nlocal function b() return 2 end\nend\n", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Compose(tc.lib, "return a()\n")
			if tc.bad != errors.Is(err, ErrLayout) {
				t.Fatalf("Compose: %v, want ErrLayout: %v", err, tc.bad)
			}
			if tc.bad && !strings.Contains(err.Error(), "line ") {
				t.Fatalf("error names no line: %v", err)
			}
		})
	}
}

// TestReadLibNamesTheFile: a misplaced line in reply.lua is reported as
// reply.lua's, and Generate fails with it.
func TestReadLibNamesTheFile(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"lib.lua":       {Data: []byte(prelude + "local function a() return 1 end\n")},
		"reply.lua":     {Data: []byte("local function rp_run(f) return f() end\nlocal X = 1\n")},
		"take_kept.lua": {Data: []byte("local function take_keep(r) return r end\n")},
	}
	_, err := ReadLib(fsys)
	if !errors.Is(err, ErrLayout) || !strings.HasPrefix(err.Error(), "reply.lua: ") || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("ReadLib: %v, want reply.lua's line 2 refused", err)
	}
	if _, err := Generate(fsys); !errors.Is(err, ErrLayout) {
		t.Fatalf("Generate: %v, want ErrLayout", err)
	}
}

// TestBuildMovesHeaderUp: the body's leading comment comes right after
// the generated line, and the code after it is the composed script.
func TestBuildMovesHeaderUp(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"lib.lua":       {Data: []byte(prelude + "local function a() return 1 end\n")},
		"reply.lua":     {Data: []byte("local function rp_run(f) return f() end\n")},
		"take_kept.lua": {Data: []byte("local function take_keep(r) return r end\n")},
		"x.lua":         {Data: []byte("-- x.lua: test\n-- KEYS[1] -> k\n-- Returns a()\nreturn a()\n")},
	}
	l, err := ReadLib(fsys)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []Script{{Name: "x"}, {Name: "x", Once: true}} {
		p, err := l.Build(fsys, s)
		if err != nil {
			t.Fatal(err)
		}
		want := GeneratedLine(s) + "-- x.lua: test\n-- KEYS[1] -> k\n-- Returns a()\n\n" + prelude + "local function a() return 1 end\n"
		body := "return a()\n"
		if s.Once {
			want += "local function rp_run(f) return f() end\n"
			body = "local function rp_body()\nreturn a()\n\nend\nreturn rp_run(rp_body)\n"
		}
		if got := string(p.File(s)); got != want+body {
			t.Errorf("once %v:\n%s\nwant:\n%s", s.Once, got, want+body)
		}
	}
}
