package delay

import (
	"regexp"
	"strings"
	"testing"
)

// compose keeps, for each script, exactly the lib functions it reaches:
// every lib function the composed text calls is defined in it, before the
// body, and a script that calls nothing of the lib gets only the prelude.
func TestComposeKeepsWhatScriptsUse(t *testing.T) {
	var defined []string
	for _, m := range libFunc.FindAllStringSubmatch(luaLib, -1) {
		defined = append(defined, m[1])
	}
	if len(defined) < 20 {
		t.Fatalf("found %d lib functions", len(defined))
	}
	bodies := map[string]string{
		"enqueue": luaEnqueue, "enqueue_batch": luaEnqueueBatch, "take": luaTake, "ack": luaAck,
		"retry": luaRetry, "kill": luaKill, "extend": luaExtend, "sweep": luaSweep, "cancel": luaCancel,
		"reschedule": luaReschedule, "requeue": luaRequeue, "purge": luaPurge, "remove": luaRemove,
		"stats": luaStats, "lookup": luaLookup, "deadlist": luaDeadList,
	}
	for name, body := range bodies {
		src := compose(luaLib, body)
		lib := strings.TrimSuffix(src, body)
		for _, fn := range defined {
			called := regexp.MustCompile(`\b` + fn + `\(`).MatchString(src)
			has := strings.Contains(lib, "local function "+fn+"(")
			if called && !has {
				t.Errorf("%s calls %s but its composed lib lacks it", name, fn)
			}
			if has && !regexp.MustCompile(`\b`+fn+`\b`).MatchString(strings.Replace(src, "local function "+fn+"(", "", 1)) {
				t.Errorf("%s carries %s, which nothing uses", name, fn)
			}
		}
		if !strings.Contains(lib, "local C_OK") {
			t.Errorf("%s lost the prelude", name)
		}
	}
	if got := compose(luaLib, "return 1"); strings.Contains(got, "local function") {
		t.Errorf("a body that uses nothing got lib functions:\n%s", got)
	}
}
