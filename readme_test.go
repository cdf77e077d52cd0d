package tierset_test

import (
	"os"
	"strings"
	"testing"
)

// readmeExampleMark is the line in README.md above the example's code
// block.
const readmeExampleMark = "<!-- The body of Example in example_test.go; TestReadmeExample fails when they differ. -->\n```go\n"

// TestReadmeExample: README.md's example is the body of Example in
// example_test.go (one tab of indent less), so the snippet a reader
// copies compiles and prints what its // Output says.
func TestReadmeExample(t *testing.T) {
	t.Parallel()
	src := readFile(t, "example_test.go")
	const open = "\nfunc Example() {\n"
	i := strings.Index(src, open)
	j := strings.LastIndex(src, "\n}")
	if i < 0 || j < i {
		t.Fatal("example_test.go has no func Example")
	}
	var want strings.Builder
	for _, l := range strings.SplitAfter(src[i+len(open):j+1], "\n") {
		want.WriteString(strings.TrimPrefix(l, "\t"))
	}

	readme := readFile(t, "README.md")
	k := strings.Index(readme, readmeExampleMark)
	if k < 0 {
		t.Fatalf("README.md lacks the line %q above its example", readmeExampleMark)
	}
	got, _, ok := strings.Cut(readme[k+len(readmeExampleMark):], "```\n")
	if !ok {
		t.Fatal("README.md's example block never closes")
	}
	if got != want.String() {
		t.Errorf("README.md's example is not Example's body: copy it from example_test.go\nREADME:\n%s\nExample:\n%s", got, want.String())
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
