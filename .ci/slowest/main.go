// Command slowest reads `go test -json` on stdin, writes the ordinary test
// output to stdout as it arrives, and at the end prints the slowest tests
// (top-level tests, by elapsed time), so each CI step shows where its time
// went. Its exit status is 0; the caller keeps go test's own.
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

func main() {
	n := flag.Int("n", 20, "how many of the slowest tests to print")
	flag.Parse()

	out := bufio.NewWriter(os.Stdout)
	var results []result
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
		if e.Output != "" {
			out.WriteString(e.Output)
			if strings.HasSuffix(e.Output, "\n") {
				out.Flush()
			}
		}
		if e.Test != "" && !strings.Contains(e.Test, "/") && (e.Action == "pass" || e.Action == "fail") {
			results = append(results, result{e.Package + " " + e.Test, e.Action, e.Elapsed})
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
	out.Flush()
}
