package tierset_test

import (
	"os"
	"strings"
	"testing"
)

// readmeExampleMark is the line in README.md above the example's code
// block.
const readmeExampleMark = "<!-- example_test.go from its import block on; TestReadmeExample fails when they differ. -->\n```go\n"

// TestReadmeExample: README.md's example is example_test.go from its
// import block to its end, the imports and the whole Example with its
// // Output, so the snippet a reader copies names every package it uses,
// compiles, and prints what it says.
func TestReadmeExample(t *testing.T) {
	t.Parallel()
	src := readFile(t, "example_test.go")
	i := strings.Index(src, "\nimport (\n")
	if i < 0 || !strings.Contains(src[i:], "\nfunc Example() {\n") {
		t.Fatal("example_test.go has no import block followed by func Example")
	}
	want := src[i+1:]

	readme := readFile(t, "README.md")
	k := strings.Index(readme, readmeExampleMark)
	if k < 0 {
		t.Fatalf("README.md lacks the line %q above its example", readmeExampleMark)
	}
	got, _, ok := strings.Cut(readme[k+len(readmeExampleMark):], "```\n")
	if !ok {
		t.Fatal("README.md's example block never closes")
	}
	if got != want {
		t.Errorf("README.md's example is not example_test.go from its imports on: copy it\nREADME:\n%s\nexample_test.go:\n%s", got, want)
	}
}

// TestReadmeSize: README.md stays a front page; details go to docs/.
func TestReadmeSize(t *testing.T) {
	t.Parallel()
	if n := len(readFile(t, "README.md")); n > 12*1024 {
		t.Errorf("README.md is %d bytes, more than 12 KiB: move details to docs/", n)
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
