package console

import (
	"encoding/json"
	"fmt"
	"html"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/opsview"
)

// A registry entry is data anyone with the Redis password can write: a
// pool ID and host holding markup reach the in-flight tab, the queue card
// and the task page escaped, and /api/tasks carries them verbatim under
// the CLI's -json field names (worker, worker_host).
func TestConsoleHolderHostileEntry(t *testing.T) {
	t.Parallel()
	eachConsole(t, true, func(t *testing.T, f *consoleFixture) {
		ctx := t.Context()
		inflight, err := f.q.List(ctx, delay.ListOptions{State: delay.StateInFlight, Limit: 10})
		if err != nil || len(inflight.Tasks) != 1 {
			t.Fatalf("the fixture's in-flight task: %v %+v", err, inflight)
		}
		id := inflight.Tasks[0].ID
		const pool, host = `p<script>alert(1)</script>`, `h"><img src=x onerror=alert(2)>`
		entry, err := json.Marshal(map[string]any{"id": pool, "host": host, "pid": 7, "mode": "weighted",
			"concurrency": 1, "running": 1, "started": "2025-01-01T00:00:00Z", "interval": "1m", "release": 1,
			"lines": []map[string]any{{"name": "orders", "queues": []string{"orders"}, "weight": 1, "running": 1,
				"holding": map[string][]string{"orders": {id}}}}})
		if err != nil {
			t.Fatal(err)
		}
		base := f.b.Prefix + ":{workers}:"
		now, err := f.b.Client.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := f.b.Client.Set(ctx, base+"w:"+pool, entry, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if err := f.b.Client.ZAdd(ctx, base+"live", redis.Z{Score: float64(now.UnixMilli()), Member: pool}).Err(); err != nil {
			t.Fatal(err)
		}
		ws, err := f.q.Workers(ctx)
		if err != nil || len(ws) != 1 || ws[0].ID != pool {
			t.Fatalf("the hand-written entry does not read: %v %+v", err, ws)
		}
		c := browser(t)
		named := html.EscapeString(pool + " (" + host + ")")
		for _, page := range []string{"/tasks?queue=orders&state=inflight", "/queue?name=orders", "/task?queue=orders&id=" + id} {
			_, body := get(t, c, f.url+page)
			if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") {
				t.Errorf("%s: the entry's markup is not escaped", page)
			}
			if !strings.Contains(body, named) {
				t.Errorf("%s: no escaped holder %q", page, named)
			}
		}
		_, body := get(t, c, f.url+"/api/tasks?queue=orders&state=inflight")
		var raw struct {
			Tasks []map[string]any `json:"tasks"`
		}
		if err := json.Unmarshal([]byte(body), &raw); err != nil || len(raw.Tasks) != 1 {
			t.Fatalf("/api/tasks: %v\n%s", err, body)
		}
		if got := fmt.Sprint(raw.Tasks[0]["worker"], "|", raw.Tasks[0]["worker_host"]); got != pool+"|"+host {
			t.Fatalf("/api/tasks worker|worker_host = %q, want %q", got, pool+"|"+host)
		}
		// the CLI's -json encodes the same opsview.Task: its tags are these names
		var v opsview.Task
		if err := json.Unmarshal([]byte(`{"worker":"a","worker_host":"b"}`), &v); err != nil || v.Worker != "a" || v.WorkerHost != "b" {
			t.Fatalf("opsview.Task does not read worker, worker_host: %v %+v", err, v)
		}
	})
}
