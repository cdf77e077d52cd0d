package console

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/testredis"
)

// mutationGate is a go-redis hook that runs fn once, just before the
// first mutating delay script (one carrying a reply key, ":rp:") sent
// after it was armed: the instant between what the console read and what
// it changes.
type mutationGate struct {
	armed atomic.Bool
	fn    func(ctx context.Context) error

	mu  sync.Mutex
	ran bool
	err error
}

func (g *mutationGate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *mutationGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (g *mutationGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); (n == "evalsha" || n == "eval") && g.mutating(cmd.Args()) && g.armed.CompareAndSwap(true, false) {
			err := g.fn(ctx) // its own commands pass through here disarmed
			g.mu.Lock()
			g.ran, g.err = true, err
			g.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (g *mutationGate) mutating(args []any) bool {
	for _, a := range args {
		if s, ok := a.(string); ok && strings.Contains(s, ":rp:") {
			return true
		}
	}
	return false
}

// TestFaultConsoleActsOnlyOnTheTaskShown: the operator confirms an action
// on task X; before the console's change reaches Redis the application
// cancels X and enqueues the same key and token again as Y. The action
// must skip X ("0 of 1") and leave Y as it was, for every task action.
func TestFaultConsoleActsOnlyOnTheTaskShown(t *testing.T) {
	testredis.EachReal(t, func(t *testing.T, b *testredis.Backend) {
		gate := &mutationGate{}
		b.Client.AddHook(gate)
		f := seedConsole(t, b, true)
		ctx := t.Context()
		at := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Minute)
		for _, action := range []string{"cancel", "delete", "run", "reschedule"} {
			t.Run(action, func(t *testing.T) {
				key := "race-" + action
				x, err := f.q.Enqueue(ctx, delay.Job{Key: key, Token: "t1", When: delay.After(time.Hour)})
				if err != nil {
					t.Fatal(err)
				}
				var y delay.Enqueued
				gate.fn = func(ctx context.Context) error {
					if _, err := f.q.Cancel(ctx, delay.Selector{Key: key, Token: "t1"}); err != nil {
						return err
					}
					y, err = f.q.Enqueue(ctx, delay.Job{Key: key, Token: "t1", When: delay.After(time.Hour)})
					return err
				}
				c := browser(t)
				q := url.Values{"queue": {"orders"}, "action": {action}, "id": {x.ID}}
				if action == "reschedule" {
					q.Set("at", at.Format(time.RFC3339))
				}
				csrf := csrfOf(t, c, f.url+"/confirm?"+q.Encode())
				form := url.Values{"csrf": {csrf}, "token": {webToken}, "confirm": {"yes"}}
				for k, v := range q {
					form[k] = v
				}
				gate.armed.Store(true)
				res := postRaw(t, c, f.url+"/act", form, nil)
				gate.armed.Store(false)
				gate.mu.Lock()
				ran, gerr := gate.ran, gate.err
				gate.ran = false
				gate.mu.Unlock()
				if !ran || gerr != nil {
					t.Fatalf("the application's cancel and enqueue did not run before the action: ran %v, %v", ran, gerr)
				}
				loc, _ := url.Parse(res.Header.Get("Location"))
				msg := ""
				if loc != nil {
					msg = loc.Query().Get("msg")
				}
				if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(msg, action+": 0 of 1 tasks") {
					t.Errorf("action answered %d %q, want 303 and %q", res.StatusCode, msg, action+": 0 of 1 tasks …")
				}
				e, err := f.q.Task(ctx, y.ID)
				if err != nil || (e.State != delay.StateDue && e.State != delay.StateScheduled) || !e.When.Equal(y.Due) {
					t.Errorf("Y (%s) after the action on X (%s): %+v, %v; want pending, due %v as enqueued", y.ID, x.ID, e, err, y.Due)
				}
			})
		}
	})
}
