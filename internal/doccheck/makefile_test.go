package doccheck

import (
	"regexp"
	"strings"
	"testing"
)

// TestMakefileMatchesCI: each Makefile target runs what .ci/run runs, so
// `make test` is the README's test command and `make race` and `make lint`
// are CI's, character for character.
func TestMakefileMatchesCI(t *testing.T) {
	t.Parallel()
	read := func(name string) string { return readRepo(t, name) }
	ci, mk, readme := read(".ci/run"), read("Makefile"), read("README.md")
	ciVar := func(name string) string {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + name + `='?([^'\n]*)'?$`).FindStringSubmatch(ci)
		if m == nil {
			t.Fatalf(".ci/run sets no %s", name)
		}
		return m[1]
	}
	recipe := func(target string) string {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + target + `:\n\t(.*)$`).FindStringSubmatch(mk)
		if m == nil {
			t.Fatalf("the Makefile has no one-line target %q", target)
		}
		return m[1]
	}
	test, race, staticcheck := ciVar("TEST_CMD"), ciVar("RACE_CMD"), ciVar("STATICCHECK")
	nested := strings.Trim(ciVar("NESTED_MODULES"), "()")
	for _, c := range []struct{ target, want string }{
		{"test", test},
		{"soak", "TIERSET_SOAK=1 " + test},
		{"race", race},
	} {
		if got := recipe(c.target); got != c.want {
			t.Errorf("make %s runs %q, .ci/run %q", c.target, got, c.want)
		}
	}
	if !strings.Contains(readme, test) {
		t.Errorf("README.md does not hold the test command %q", test)
	}
	lint := recipe("lint")
	for _, want := range []string{"gofmt -l .", "go vet ./...", "go run " + staticcheck, "for m in . " + nested + ";"} {
		if !strings.Contains(lint, want) {
			t.Errorf("make lint (%q) lacks %q", lint, want)
		}
	}
	for _, target := range []string{"generate", "bench"} {
		recipe(target)
	}
}
