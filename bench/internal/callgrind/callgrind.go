// Package callgrind is what the server-cost commands (bench/cachecost,
// bench/servercost) share: their command line, and the dump of the
// counters of a redis-server that runs under valgrind's callgrind.
package callgrind

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
)

// Main parses -addr (the server, default addr), -pid (its process ID)
// and -n (default n; nUsage says what it counts), and calls run with
// them. An error is printed after the command's name, with exit code 1.
func Main(name, addr string, n int, nUsage string, run func(addr, pid string, n int) error) {
	a := flag.String("addr", addr, "the redis-server under callgrind")
	pid := flag.String("pid", "", "its process ID (for callgrind_control)")
	count := flag.Int("n", n, nUsage)
	flag.Parse()
	if err := run(*a, *pid, *count); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Dump makes callgrind in process pid dump its counters now, under the
// name phase, so each phase's instruction count stands apart.
func Dump(pid, phase string) error {
	if out, err := exec.Command("callgrind_control", "-d", phase, pid).CombinedOutput(); err != nil {
		return fmt.Errorf("callgrind_control: %w: %s", err, out)
	}
	return nil
}
