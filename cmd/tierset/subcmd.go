package main

import (
	"flag"
	"slices"
	"strings"
)

// subcommand is one subcommand of queue, budget or periodic, with the
// flags it reads besides its command's common ones.
type subcommand struct {
	name  string
	flags []string
}

// command is a command made of subcommands, listed in the order help
// names them.
type command struct {
	name   string
	subs   []subcommand
	common []string // the flags every subcommand reads
	flags  func() *cmdFlags
}

// parse picks args' subcommand and parses its flags. -h prints the help
// (errHelp); a missing or unknown subcommand, a bad flag, and a flag the
// subcommand does not read (`queue requeue -json`) are usage errors, so
// nothing given is ignored.
func (c command) parse(args []string, e *env) (string, *cmdFlags, error) {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		c.flags().printHelp(e.stdout)
		return "", nil, errHelp
	}
	names := make([]string, len(c.subs))
	for i, s := range c.subs {
		names[i] = s.name
	}
	want := strings.Join(names, ", ")
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return "", nil, usagef("want a subcommand: %s", want)
	}
	i := slices.IndexFunc(c.subs, func(s subcommand) bool { return s.name == args[0] })
	if i < 0 {
		return "", nil, usagef("unknown %s subcommand %s (want %s)", c.name, quoteArg(args[0]), want)
	}
	sub := c.subs[i]
	fs := c.flags()
	if err := fs.parse(args[1:], e); err != nil {
		return "", nil, err
	}
	var bad []string
	fs.Visit(func(f *flag.Flag) {
		if !slices.Contains(c.common, f.Name) && !slices.Contains(sub.flags, f.Name) {
			bad = append(bad, "-"+f.Name)
		}
	})
	if len(bad) > 0 {
		return "", nil, usagef("%s does not take %s", sub.name, strings.Join(bad, ", "))
	}
	return sub.name, fs, nil
}
