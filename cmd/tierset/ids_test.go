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

// Every queue subcommand says which flags it reads, so onlyFlags refuses
// the others.
func TestQueueSubFlags(t *testing.T) {
	for _, sub := range queueSubs {
		if _, ok := queueSubFlags[sub]; !ok {
			t.Errorf("queue %s has no entry in queueSubFlags", sub)
		}
	}
	if len(queueSubFlags) != len(queueSubs) {
		t.Errorf("queueSubFlags has %d entries, queueSubs %d", len(queueSubFlags), len(queueSubs))
	}
	fs := queueFlags()
	for sub, flags := range queueSubFlags {
		for _, f := range flags {
			if fs.Lookup(f) == nil {
				t.Errorf("queue %s reads -%s, which queueFlags does not define", sub, f)
			}
		}
	}
}
