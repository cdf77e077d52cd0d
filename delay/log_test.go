package delay

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/testredis"
)

// records is a slog.Handler that keeps what it is given.
type records struct {
	mu  sync.Mutex
	got []slog.Record
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }
func (h *records) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *records) WithGroup(string) slog.Handler            { return h }
func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.got = append(h.got, r.Clone())
	return nil
}

// text returns every record's message and attributes, one line each.
func (h *records) text() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.got {
		var b strings.Builder
		b.WriteString(r.Level.String() + " " + r.Message)
		r.Attrs(func(a slog.Attr) bool {
			b.WriteString(" " + a.String())
			return true
		})
		out = append(out, b.String())
	}
	return out
}

// A worker that Redis refuses (a wrong password, none where one is
// required, an ACL user that may not run the take script) returns the
// refusal from Run at once instead of retrying forever, and the default
// logger has said so.
func TestFaultRefusedLoginEndsRun(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-for-the-test"
	srv := testredis.StartServer(t, "--requirepass", secret)
	admin := srv.Client(&redis.Options{Password: secret})
	ctx := testCtx(t)
	// An ACL user that may read and write keys but not run scripts.
	if err := admin.Do(ctx, "ACL", "SETUSER", "noscripts", "on", ">pw", "~*", "+@all", "-@scripting").Err(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, user, pass, want string
	}{
		{"wrong password", "", "wrong", "WRONGPASS"},
		{"no password", "", "", "NOAUTH"},
		{"no permission", "noscripts", "pw", "NOPERM"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := srv.Client(&redis.Options{Username: tc.user, Password: tc.pass, MaxRetries: -1})
			logs := &records{}
			q, err := New(c, "refused", Options{Logger: slog.New(logs)})
			if err != nil {
				t.Fatal(err)
			}
			w, err := NewWorker(q, func(context.Context, *Task) error { return nil }, WorkerOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			start := time.Now()
			err = w.Run(rctx)
			if err == nil || errors.Is(err, context.DeadlineExceeded) || !redis.HasErrorPrefix(err, tc.want) {
				t.Fatalf("Run after %v = %v, want the %s refusal", time.Since(start), err, tc.want)
			}
			lines := logs.text()
			t.Logf("Run returned after %v: %v; logged %q", time.Since(start).Round(time.Millisecond), err, lines)
			if len(lines) == 0 || !strings.Contains(strings.Join(lines, "\n"), tc.want) {
				t.Fatalf("nothing logged the %s refusal: %q", tc.want, lines)
			}
		})
	}
}

// The default logger reports a queue's errors once per kind every
// logEvery, the count suppressed in between carried by the next line.
func TestLogObserverLimitsEachKind(t *testing.T) {
	t.Parallel()
	logs := &records{}
	o := newLogObserver(NopObserver{}, slog.New(logs))
	t0 := time.Unix(1_700_000_000, 0)
	steps := []struct {
		kind   string
		at     time.Duration
		logged bool
		supp   int
	}{
		{"a", 0, true, 0},
		{"a", time.Second, false, 0},
		{"b", time.Second, true, 0}, // another kind is not held back by a
		{"a", 2 * time.Second, false, 0},
		{"a", logEvery, true, 2},
		{"a", logEvery + time.Millisecond, false, 0},
		{"a", 3 * logEvery, true, 1},
	}
	for i, s := range steps {
		ok, n := o.allow(s.kind, t0.Add(s.at))
		if ok != s.logged || n != s.supp {
			t.Errorf("step %d (%s at %v): allow = %v, %d suppressed; want %v, %d", i, s.kind, s.at, ok, n, s.logged, s.supp)
		}
	}
	// Through the Observer methods: an error, a loss and a warning each
	// log once, and the caller's Observer sees every event.
	rec := &Recorder{}
	o = newLogObserver(rec, slog.New(logs))
	for range 3 {
		o.OnError("q", "take", errors.New("boom"))
		o.OnWarning("q", ErrHighWater)
		o.OnLoss("q", ErrIndexLost, 1)
	}
	if got := len(logs.text()); got != 3 {
		t.Errorf("logged %d lines for 3 kinds, want 3: %q", got, logs.text())
	}
	if rec.Errors.Load() != 3 {
		t.Errorf("the caller's Observer saw %d errors, want 3", rec.Errors.Load())
	}
}

// A discarding logger costs nothing and logs nothing; New never wraps a
// queue's Observer twice (Sharded passes its normalized options on).
func TestLoggerDefaultsAndDiscard(t *testing.T) {
	t.Parallel()
	o, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	lo, ok := o.Observer.(*logObserver)
	if !ok || lo.log != slog.Default() {
		t.Fatalf("default Observer %T does not log to slog.Default()", o.Observer)
	}
	again, err := o.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if again.Observer != o.Observer {
		t.Fatal("withDefaults wrapped the logging Observer twice")
	}
	d := newLogObserver(NopObserver{}, slog.New(slog.DiscardHandler))
	d.OnError("q", "take", errors.New("boom"))
	if len(d.last) != 0 {
		t.Fatal("a discarding logger still tracked the kind")
	}
}
