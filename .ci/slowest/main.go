// Command slowest reads `go test -json` on stdin, writes the ordinary test
// output to stdout as it arrives, and at the end prints the slowest tests
// (top-level tests, by elapsed time), so each CI step shows where its time
// went. Last it prints every failed test and package again with the tail of
// its own output: a CI log is often read from its end only, and a failure
// deep in a long step would otherwise be out of sight. Its exit status is 0;
// the caller keeps go test's own.
//
//	go test -json ./... | go run ./.ci/slowest -n 20
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

type result struct {
	name    string
	action  string
	elapsed float64
}

// tailLines is how many of a failed test's last output lines are printed
// again at the end.
const tailLines = 60

// tail keeps the last tailLines lines written to it.
type tail struct {
	lines []string
}

func (t *tail) add(s string) {
	t.lines = append(t.lines, s)
	if len(t.lines) > 2*tailLines {
		t.lines = append(t.lines[:0], t.lines[len(t.lines)-tailLines:]...)
	}
}

func (t *tail) last() []string {
	if len(t.lines) > tailLines {
		return t.lines[len(t.lines)-tailLines:]
	}
	return t.lines
}

func main() {
	n := flag.Int("n", 20, "how many of the slowest tests to print")
	flag.Parse()

	out := bufio.NewWriter(os.Stdout)
	var results []result
	tails := map[string]*tail{} // by package and top-level test ("" for the package's own)
	var failed []string         // keys of tails, in the order they failed
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	for in.Scan() {
		line := in.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			// Build errors and anything else go test prints outside the stream.
			out.Write(line)
			out.WriteByte('\n')
			out.Flush()
			continue
		}
		top, _, _ := strings.Cut(e.Test, "/")
		key := e.Package + " " + top
		if e.Output != "" {
			out.WriteString(e.Output)
			if strings.HasSuffix(e.Output, "\n") {
				out.Flush()
			}
			t := tails[key]
			if t == nil {
				t = &tail{}
				tails[key] = t
			}
			t.add(e.Output)
		}
		if e.Action == "fail" && (e.Test == "" || e.Test == top) {
			failed = append(failed, key)
		}
		if e.Test != "" && e.Test == top && (e.Action == "pass" || e.Action == "fail") {
			results = append(results, result{key, e.Action, e.Elapsed})
			if e.Action == "pass" {
				delete(tails, key)
			}
		}
		if e.Test == "" && (e.Action == "pass" || e.Action == "skip") {
			delete(tails, key)
		}
	}
	sort.Slice(results, func(i, j int) bool { return results[i].elapsed > results[j].elapsed })
	if len(results) > *n {
		results = results[:*n]
	}
	fmt.Fprintf(out, "\nslowest %d tests:\n", len(results))
	for _, r := range results {
		fmt.Fprintf(out, "  %8s  %-4s  %s\n", time.Duration(r.elapsed*float64(time.Second)).Round(10*time.Millisecond), r.action, r.name)
	}
	if len(failed) > 0 {
		fmt.Fprintf(out, "\nfailed (%d), each with the last %d lines of its output:\n", len(failed), tailLines)
		for _, key := range failed {
			fmt.Fprintf(out, "\n--- %s\n", key)
			if t := tails[key]; t != nil {
				for _, s := range t.last() {
					out.WriteString(s)
				}
			}
		}
	}
	out.Flush()
}
