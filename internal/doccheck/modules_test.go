package doccheck

import (
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestModulesReleasable: a user can fetch every nested module. Each
// nested go.mod requires the root at a released version (a plain semver
// with a CHANGELOG.md entry, never a pseudo-version) and has no replace
// directive; go.work uses exactly the repository's modules and maps that
// version, and no other, to the working tree; .ci/run's NESTED_MODULES
// lists every nested module.
func TestModulesReleasable(t *testing.T) {
	t.Parallel()
	read := func(name string) string { return readRepo(t, name) }
	var nested []string
	err := filepath.WalkDir(repo, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != repo && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.Name() == "go.mod" && filepath.Dir(path) != repo {
			rel, err := filepath.Rel(repo, filepath.Dir(path))
			nested = append(nested, filepath.ToSlash(rel))
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(nested) < 4 {
		t.Fatalf("found nested modules %v, want pg, contrib/prometheus, bench/peers, test/browser at least", nested)
	}
	slices.Sort(nested)

	work := read("go.work")
	use := regexp.MustCompile(`(?s)\nuse \((.*?)\)`).FindStringSubmatch(work)
	if use == nil {
		t.Fatal("go.work has no use ( ... ) block")
	}
	var used []string
	for _, f := range strings.Fields(use[1]) {
		used = append(used, strings.TrimPrefix(f, "./"))
	}
	slices.Sort(used)
	if want := append([]string{"."}, nested...); !slices.Equal(used, want) {
		t.Errorf("go.work uses %v, want %v", used, want)
	}
	replaces := regexp.MustCompile(`(?m)^replace (\S+) (\S+) => (\S+)$`).FindAllStringSubmatch(work, -1)
	if len(replaces) != 1 || replaces[0][1] != "github.com/tierset/tierset" || replaces[0][3] != "./" {
		t.Fatalf("go.work replaces %q, want one line: github.com/tierset/tierset <release> => ./", replaces)
	}
	release := replaces[0][2]
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(release) {
		t.Errorf("go.work maps %q, want a release version vX.Y.Z", release)
	}
	if !strings.Contains(read("CHANGELOG.md"), "\n## ["+release+"]") {
		t.Errorf("CHANGELOG.md has no entry for %s, the release the nested modules require", release)
	}

	requires := regexp.MustCompile(`(?m)^\s*(?:require\s+)?github\.com/tierset/tierset(/\S+)? (\S+)`)
	for _, dir := range nested {
		mod := read(dir + "/go.mod")
		if regexp.MustCompile(`(?m)^replace\b`).MatchString(mod) {
			t.Errorf("%s/go.mod has a replace directive: go get ignores it, so a user's build differs (the workspace is go.work)", dir)
		}
		root := false
		for _, m := range requires.FindAllStringSubmatch(mod, -1) {
			switch {
			case m[1] != "":
				t.Errorf("%s/go.mod requires github.com/tierset/tierset%s %s: no nested module has a release yet; use it through go.work", dir, m[1], m[2])
			case m[2] != release:
				t.Errorf("%s/go.mod requires the root at %s, want the release go.work maps, %s", dir, m[2], release)
			default:
				root = true
			}
		}
		if !root {
			t.Errorf("%s/go.mod does not require github.com/tierset/tierset %s", dir, release)
		}
	}

	ci := regexp.MustCompile(`(?m)^NESTED_MODULES=\(([^)]*)\)$`).FindStringSubmatch(read(".ci/run"))
	if ci == nil {
		t.Fatal(".ci/run sets no NESTED_MODULES=( ... )")
	}
	listed := strings.Fields(ci[1])
	slices.Sort(listed)
	if !slices.Equal(listed, nested) {
		t.Errorf(".ci/run NESTED_MODULES lists %v, want every nested module %v", listed, nested)
	}
}
