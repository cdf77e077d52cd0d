// Command luagen writes what delay/internal/luacompose generates from the
// one list of scripts: the composed Redis scripts in lua/gen/<name>.lua,
// each from lua/lib.lua and lua/<name>.lua, and scripts_gen.go, which
// runs them. go generate runs it in delay/ (scripts.go); a file in lua/gen
// no script writes any more is removed, so lua/gen holds exactly what
// delay embeds.
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tierset/tierset/delay/internal/luacompose"
)

func main() {
	if err := gen("."); err != nil {
		fmt.Fprintln(os.Stderr, "luagen:", err)
		os.Exit(1)
	}
}

// gen writes the generated files under dir, the delay package.
func gen(dir string) error {
	files, err := luacompose.Generate(os.DirFS(filepath.Join(dir, "lua")))
	if err != nil {
		return err
	}
	out := filepath.Join(dir, filepath.FromSlash(luacompose.GenDir))
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(out, "*.lua"))
	if err != nil {
		return err
	}
	for _, p := range old {
		if _, ok := files[luacompose.GenDir+"/"+filepath.Base(p)]; !ok {
			if err := os.Remove(p); err != nil {
				return err
			}
		}
	}
	for name, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if cur, err := os.ReadFile(p); err == nil && bytes.Equal(cur, b) {
			continue // unchanged: its mtime stays
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
