package testredis

import "strings"

// InfoFields parses the reply of INFO into its field: value pairs, for
// tests that read a server's process_id, role or replica count.
func InfoFields(info string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out
}
