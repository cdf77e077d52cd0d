package main

import (
	"slices"
	"strings"
	"testing"
)

// -ids takes the IDs the listings print (lower-case base 36) and refuses
// spellings that would name the same number but no task.
func TestParseIDs(t *testing.T) {
	cases := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{"", nil, ""},
		{"1a, 1b ,zz", []string{"1a", "1b", "zz"}, ""},
		{"9", []string{"9"}, ""},
		{"1A", nil, `"1A" is not a task ID`},
		{"01", nil, `"01" is not a task ID`},
		{"0", nil, `"0" is not a task ID`},
		{"-1,+1", nil, `"-1", "+1" are not task IDs`},
		{"1_0", nil, `"1_0" is not a task ID`},
		{"1.5", nil, `"1.5" is not a task ID`},
		{"zzzzzzzzzzzzzzz", nil, "is not a task ID"}, // beyond 2^63
		{"1,,2", nil, `"" is not a task ID`},
	}
	for _, tc := range cases {
		got, err := parseIDs(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseIDs(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseIDs(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// Every flag a subcommand says it reads is one its command defines.
func TestSubcommandFlags(t *testing.T) {
	for _, c := range []command{queueCmd, budgetCmd, periodicCmd} {
		fs := c.flags()
		for _, f := range c.common {
			if fs.Lookup(f) == nil {
				t.Errorf("%s: every subcommand reads -%s, which its flags do not define", c.name, f)
			}
		}
		for _, sub := range c.subs {
			for _, f := range sub.flags {
				if fs.Lookup(f) == nil {
					t.Errorf("%s %s reads -%s, which its flags do not define", c.name, sub.name, f)
				}
			}
		}
	}
}
