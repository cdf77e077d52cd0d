package main

import (
	"io"
	"strings"

	"github.com/tierset/tierset/internal/redisconf"
)

// redisSecrets returns the passwords in every -redis value of args.
func redisSecrets(args []string) []string {
	var out []string
	for i, a := range args {
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name != "redis" || !strings.HasPrefix(a, "-") {
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				continue
			}
			val = args[i+1]
		}
		out = append(out, redisconf.Secrets(val)...)
	}
	return out
}

// minScrub is the shortest secret the output filter replaces: shorter
// ones would mangle ordinary words, and every place that prints a URL
// redacts it anyway (the filter is the second line of defence, for text
// a library quotes the URL in).
const minScrub = 4

// scrubbing returns e with stdout and stderr passed through a filter
// that replaces each secret with "xxxxx".
func (e *env) scrubbing(secrets []string) *env {
	var keep []string
	for _, s := range secrets {
		if len(s) >= minScrub {
			keep = append(keep, s)
		}
	}
	if len(keep) == 0 {
		return e
	}
	pairs := make([]string, 0, 2*len(keep))
	for _, s := range keep {
		pairs = append(pairs, s, redisconf.Redacted)
	}
	r := strings.NewReplacer(pairs...)
	c := *e
	c.stdout = scrubWriter{w: e.stdout, r: r}
	c.stderr = scrubWriter{w: e.stderr, r: r}
	return &c
}

// scrubWriter replaces secrets in every Write; each Fprintf is one Write.
type scrubWriter struct {
	w io.Writer
	r *strings.Replacer
}

func (s scrubWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(s.w, s.r.Replace(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
