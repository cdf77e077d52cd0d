package prometheus_test

import (
	"os"
	"strings"
	"testing"
)

// alertRule is what TestAlertRules reads of a rule in alerts.yml.
type alertRule struct {
	name, expr, severity, summary string
}

// TestAlertRules reads alerts.yml (a line-based read of the rules format:
// the module keeps no YAML parser) and checks each alert: an expression
// that is well formed and names only series and labels the collectors
// export, a severity, and a summary. It also checks the alerts an
// operator needs are there.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules []alertRule
	for _, line := range strings.Split(string(raw), "\n") {
		l := strings.TrimSpace(line)
		if strings.HasPrefix(l, "#") || l == "" {
			continue
		}
		if strings.Contains(l, "\t") || strings.Contains(line, "\t") {
			t.Fatalf("a tab in alerts.yml: %q (YAML indents with spaces)", line)
		}
		k, v, _ := strings.Cut(strings.TrimPrefix(l, "- "), ":")
		v = strings.Trim(strings.TrimSpace(v), `"`)
		switch k {
		case "alert":
			rules = append(rules, alertRule{name: v})
		case "expr", "severity", "summary":
			if len(rules) == 0 {
				t.Fatalf("%s before any alert", k)
			}
			r := &rules[len(rules)-1]
			switch k {
			case "expr":
				r.expr = v
			case "severity":
				r.severity = v
			case "summary":
				r.summary = v
			}
		}
	}
	names, labels := exported(t)
	var exprs []string
	have := map[string]bool{}
	for _, r := range rules {
		if r.expr == "" || r.severity == "" || r.summary == "" {
			t.Errorf("alert %s lacks an expr, a severity or a summary: %+v", r.name, r)
		}
		exprs = append(exprs, r.expr)
		have[r.name] = true
	}
	checkExprs(t, exprs, names, labels)
	for _, want := range []string{"TiersetQueueNoWorker", "TiersetQueueBehind", "TiersetQueueLostState",
		"TiersetQueueHighWater", "TiersetQueueDeadLettersRising", "TiersetQueueDown"} {
		if !have[want] {
			t.Errorf("alerts.yml lacks %s", want)
		}
	}
}
