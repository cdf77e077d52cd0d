// Package cli holds what the peer benchmark commands (peers and cart)
// share around their runs: reading their count lists, reporting the
// machine's load, and ending with the floors.
package cli

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/tierset/tierset/internal/measure"
)

// PositiveInts reads list, comma-separated positive integers given to the
// flag name of command cmd; anything else ends the process with status 2
// (a usage error).
func PositiveInts(cmd, name, list string) []int {
	var out []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "%s: -%s: %q is not a positive integer\n", cmd, name, s)
			os.Exit(2)
		}
		out = append(out, n)
	}
	return out
}

// Finish ends command cmd after its run: it exits 1 when the run failed,
// writes the floor rows as JSON to floorsPath when one is given (exit 1
// when that fails), and under strict exits 1 when a robust floor failed
// or could not be judged.
func Finish(cmd string, floors *measure.Floors, err error, floorsPath string, strict bool) {
	if err != nil {
		fmt.Fprintln(os.Stderr, cmd+":", err)
		os.Exit(1)
	}
	if floorsPath != "" {
		f, err := os.Create(floorsPath)
		if err == nil {
			err = errors.Join(floors.WriteJSON(f), f.Close())
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, cmd+": -floors:", err)
			os.Exit(1)
		}
	}
	if strict && len(floors.Failures(true)) > 0 {
		os.Exit(1)
	}
}

// LoadAvg is the machine's 1, 5 and 15 minute load averages, or
// "unknown" where /proc/loadavg does not say.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
