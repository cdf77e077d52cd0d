// Command tierset is the operator's tool for the tier cache: it warms
// rules files into Redis, matches a value against a stored promotion,
// inspects delay queues, and runs a self-contained demo.
//
// Usage:
//
//	tierset warm  -rules FILE [-redis URL] [-prefix P] [-prune [-max-prune N]] [-dry-run] [-progress auto|always|never]
//	tierset match -promo ID -value V [-base AMOUNT] [-rounding MODE] [-at TIME] [-redis URL | -rules FILE] [-prefix P]
//	tierset demo  [-rules FILE] [-at TIME]
//	tierset queue ls|stats|tasks|dead|requeue|purge|cancel|reschedule|run|pause|resume [-queue NAME] -redis URL [-prefix P] [-yes]
//	tierset budget ls|show [-budget NAME] [-order ID] -redis URL [-prefix P] [-json]
//	tierset periodic list|pause|resume|forget [-queue NAME] [-job NAME] -redis URL [-prefix P] [-json]
//	tierset audit -redis URL [-match PATTERN] [-json]
//	tierset web   -redis URL [-listen ADDR] [-token T]
//	tierset version
//
// Without -redis, warm and match run against an embedded in-memory Redis
// and warn that nothing persists; match then warms -rules (default the
// built-in examples/rules.json) into it first. -redis takes host:port, a
// redis:// or rediss:// URL, or comma-separated cluster seeds. Exit codes: 0 ok, 1 failure, 2 usage.
//
// Nothing secret or raw reaches the terminal: a Redis URL is printed with
// its password as "xxxxx", and text read from Redis or a file (IDs, keys,
// names, stored error texts) is printed with control characters escaped.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/redisconf"
	"github.com/tierset/tierset/internal/text"
)

const topUsage = `tierset: the tier cache's operator tool.

Usage:
  tierset warm  -rules FILE [-redis URL] [-prefix P] [-prune [-max-prune N]] [-dry-run]
  tierset match -promo ID -value V [-base AMOUNT] [-rounding MODE] [-redis URL | -rules FILE]
  tierset demo  [-rules FILE]
  tierset queue ls|stats|tasks|dead|requeue|purge|cancel|reschedule|run|pause|resume [-queue NAME] -redis URL
  tierset budget ls|show [-budget NAME] [-order ID] -redis URL [-json]
  tierset periodic list|pause|resume|forget [-queue NAME] [-job NAME] -redis URL [-json]
  tierset audit -redis URL [-match PATTERN] [-json]
  tierset web   -redis URL [-listen 127.0.0.1:8080] [-token T]
  tierset version

-redis takes host:port, a redis:// or rediss:// URL, or comma-separated
cluster seeds (host:port,host:port; one seed as "host:port,").

Without -redis, warm and match use an embedded in-memory Redis: nothing
persists. Run "tierset <command> -h" for a command's flags.
Exit codes: 0 ok, 1 failure, 2 usage error.
`

// env is the process's outside world, swapped in tests.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// tty reports whether stdout is a terminal (progress lines).
	tty bool
}

// usageError is a command-line mistake: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// errHelp means -h was asked for and printed: exit 0.
var errHelp = errors.New("help printed")

func main() {
	// go-redis logs dial failures itself (pool.go lines) before the error
	// reaches the command: the command's own message says it once.
	redis.SetLogger(silentLogger{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	e := &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, tty: isTerminal(os.Stdout)}
	code := run(ctx, os.Args[1:], e)
	stop()
	os.Exit(code)
}

// silentLogger drops go-redis's internal log lines.
type silentLogger struct{}

func (silentLogger) Printf(context.Context, string, ...any) {}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

var commands = map[string]func(ctx context.Context, args []string, e *env) error{
	"warm":     cmdWarm,
	"match":    cmdMatch,
	"demo":     cmdDemo,
	"queue":    cmdQueue,
	"web":      cmdWeb,
	"audit":    cmdAudit,
	"periodic": cmdPeriodic,
	"version": func(_ context.Context, args []string, e *env) error {
		if err := newFlags("version", "tierset version").parse(args, e); err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, versionLine())
		return nil
	},
	"budget": cmdBudget,
}

// versionLine is the module version (a tag under go install), or the VCS
// revision of a build from a checkout, and the Go version.
func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "tierset (no build information)"
	}
	v := bi.Main.Version
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = " (modified)"
			}
		}
	}
	if (v == "" || v == "(devel)") && rev != "" {
		v = "devel " + rev[:min(12, len(rev))] + dirty
	}
	if v == "" {
		v = "(devel)"
	}
	return fmt.Sprintf("tierset %s, %s", v, bi.GoVersion)
}

func run(ctx context.Context, args []string, e *env) int {
	e = e.scrubbing(append(redisSecrets(args), redisconf.Secrets(os.Getenv(redisconf.EnvURL))...))
	if len(args) == 0 {
		fmt.Fprint(e.stderr, topUsage)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(e.stdout, topUsage)
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(e.stderr, "tierset: unknown command %s\n\n%s", quoteArg(args[0]), topUsage)
		return 2
	}
	err := cmd(ctx, args[1:], e)
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errHelp):
		return 0
	case errors.Is(err, errAuditFound):
		return 1 // the report said it
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "tierset %s: %s\nRun \"tierset %s -h\" for help.\n", args[0], text.EscapeLines(ue.msg), args[0])
		return 2
	default:
		// Errors carry text from Redis and files: escaped, so a stored
		// message cannot move the cursor or forge a line.
		fmt.Fprintf(e.stderr, "tierset %s: %s\n", args[0], indentLines(text.EscapeLines(err.Error())))
		return 1
	}
}

// indentLines keeps joined errors readable: one per line, indented.
func indentLines(s string) string {
	return strings.ReplaceAll(s, "\n", "\n  ")
}

// cmdFlags is a command's flag set and its one-line synopsis.
type cmdFlags struct {
	*flag.FlagSet
	synopsis string
}

// newFlags builds a command's flag set: errors and help are printed by
// parse, not by the flag package.
func newFlags(name, synopsis string) *cmdFlags {
	fs := flag.NewFlagSet("tierset "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &cmdFlags{FlagSet: fs, synopsis: synopsis}
}

// parse parses args; -h prints the help to stdout and returns errHelp,
// a bad flag or a positional argument returns a usageError.
func (fs *cmdFlags) parse(args []string, e *env) error {
	for _, a := range args {
		if len(a) > maxArgLen {
			return usagef("argument %s is longer than %d bytes", text.Quote(a), maxArgLen)
		}
	}
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.printHelp(e.stdout)
		return errHelp
	}
	if err != nil {
		// The flag package quotes a bad value whole.
		return usagef("%s", shortQuoted.ReplaceAllStringFunc(err.Error(), func(q string) string {
			if u, err := strconv.Unquote(q); err == nil {
				return text.Quote(u)
			}
			return q
		}))
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %s", quoteArg(fs.Arg(0)))
	}
	return nil
}

// shortQuoted finds the quoted strings of a flag package error.
var shortQuoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

func (fs *cmdFlags) printHelp(w io.Writer) {
	fmt.Fprintf(w, "Usage: %s\n\nFlags:\n", fs.synopsis)
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		line := "  -" + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintf(w, "%s\n    \t%s", line, strings.ReplaceAll(usage, "\n", "\n    \t"))
		if f.DefValue != "" && f.DefValue != "false" {
			fmt.Fprintf(w, " (default %q)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}
