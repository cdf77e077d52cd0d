package delay

import (
	"context"
	"errors"
	"fmt"
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
// required, an ACL user that may not run the take script, a command the
// script calls or the wake loop's BLPOP, a WakeClient that cannot log in)
// returns the refusal from Run at once instead of retrying forever, and
// the default logger has said so.
func TestFaultRefusedLoginEndsRun(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-for-the-test"
	srv := testredis.StartServer(t, "--requirepass", secret)
	admin := srv.Client(&redis.Options{Password: secret})
	ctx := testCtx(t)
	// ACL users that may read and write keys but not run scripts, not
	// TIME (which the take script calls: Redis 7.0 refuses it with an ERR
	// naming the script, later versions with NOPERM), not BLPOP.
	for user, deny := range map[string]string{"noscripts": "-@scripting", "notime": "-time", "noblocking": "-@blocking"} {
		if err := admin.Do(ctx, "ACL", "SETUSER", user, "on", ">pw", "~*", "&*", "+@all", deny).Err(); err != nil {
			t.Fatal(err)
		}
	}
	scriptACL := "The user executing the script can't run this command"
	cases := []struct {
		name, user, pass string
		wakePass         string // the WakeClient's password, if it has one
		want             []string
	}{
		{name: "wrong password", pass: "wrong", want: []string{"WRONGPASS"}},
		{name: "no password", want: []string{"NOAUTH"}},
		{name: "no permission", user: "noscripts", pass: "pw", want: []string{"NOPERM"}},
		{name: "script may not call TIME", user: "notime", pass: "pw", want: []string{"NOPERM", scriptACL}},
		{name: "no BLPOP", user: "noblocking", pass: "pw", want: []string{"NOPERM"}},
		{name: "wake client wrong password", pass: secret, wakePass: "wrong", want: []string{"WRONGPASS"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := srv.Client(&redis.Options{Username: tc.user, Password: tc.pass, MaxRetries: -1})
			logs := &records{}
			q, err := New(c, "refused", Options{Logger: slog.New(logs)})
			if err != nil {
				t.Fatal(err)
			}
			wo := workerOpts{}
			if tc.wakePass != "" {
				wo.WakeClient = srv.Client(&redis.Options{Password: tc.wakePass, MaxRetries: -1})
			}
			w, err := newWorker(q, func(context.Context, *Task) error { return nil }, wo)
			if err != nil {
				t.Fatal(err)
			}
			// The subtest's own ctx: a parallel subtest may start long
			// after the parent's ctx was made (behind the package's other
			// parallel tests), and that ctx's 2 minutes may be gone.
			rctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
			defer cancel()
			start := time.Now()
			err = w.Run(rctx)
			matches, said := false, ""
			for _, want := range tc.want {
				if redis.HasErrorPrefix(err, want) {
					matches, said = true, want
				}
			}
			if err == nil || errors.Is(err, context.DeadlineExceeded) || !matches || !strings.Contains(err.Error(), "queue refused") {
				t.Fatalf("Run after %v = %v, want the refusal (%q), naming the queue", time.Since(start), err, tc.want)
			}
			lines := logs.text()
			t.Logf("Run returned after %v: %v; logged %q", time.Since(start).Round(time.Millisecond), err, lines)
			if !strings.Contains(strings.Join(lines, "\n"), said) {
				t.Fatalf("nothing logged the refusal %v: %q", err, lines)
			}
		})
	}
}

// A refusal after the first take (the password changed while the worker
// runs) is no configuration error: the worker logs it, retries, and
// resumes once the password works again.
func TestFaultRefusalMidRunRetried(t *testing.T) {
	t.Parallel()
	srv := testredis.StartServer(t, "--requirepass", "admin-pw")
	admin := srv.Client(&redis.Options{Password: "admin-pw"})
	ctx := testCtx(t)
	if err := admin.Do(ctx, "ACL", "SETUSER", "w", "on", ">pw", "~*", "&*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	c := srv.Client(&redis.Options{Username: "w", Password: "pw", MaxRetries: -1})
	logs := &records{}
	rec := &Recorder{}
	q, err := New(c, "midrun", Options{Logger: slog.New(logs), Observer: obsOf(rec)})
	if err != nil {
		t.Fatal(err)
	}
	handled := make(chan string, 4)
	w, err := newWorker(q, func(_ context.Context, tk *Task) error { handled <- tk.Key; return nil },
		workerOpts{ReconnectMin: 5 * time.Millisecond, ReconnectMax: 20 * time.Millisecond, Heartbeat: -1})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(rctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
	})
	await := func(key string) {
		t.Helper()
		select {
		case got := <-handled:
			if got != key {
				t.Fatalf("handled %q, want %q", got, key)
			}
		case err := <-done:
			t.Fatalf("Run returned %v before %q was handled", err, key)
		case <-time.After(5 * time.Second):
			t.Fatalf("%q not handled", key)
		}
	}
	mustEnqueue(t, ctx, q, Job{Key: "before"})
	await("before")
	// The wake loop has answered once (popped the enqueue's wake-up).
	for deadline := time.Now().Add(5 * time.Second); admin.LLen(ctx, q.k.wake).Val() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the wake-up was never popped")
		}
	}
	// The password changes and every connection of w is cut.
	if err := admin.Do(ctx, "ACL", "SETUSER", "w", "resetpass", ">new").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "CLIENT", "KILL", "USER", "w").Err(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(strings.Join(logs.text(), "\n"), "WRONGPASS"); {
		if time.Now().After(deadline) {
			t.Fatalf("the refusal was not logged: %q", logs.text())
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned %v on a refusal after its first take", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	// The old password works again: the worker resumes.
	if err := admin.Do(ctx, "ACL", "SETUSER", "w", ">pw").Err(); err != nil {
		t.Fatal(err)
	}
	qa, err := New(admin, "midrun", Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustEnqueue(t, ctx, qa, Job{Key: "after"})
	await("after")
	if rec.Errors.Load() == 0 {
		t.Fatal("the caller's Observer saw no error")
	}
}

// opErrors is an Observer that keeps the errors it is given by queue and op.
type opErrors struct {
	NopObserver
	mu  sync.Mutex
	got map[string]int
}

func (o *opErrors) OnError(queue, op string, _ error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.got == nil {
		o.got = map[string]int{}
	}
	o.got[queue+" "+op]++
}

func (o *opErrors) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprint(o.got)
}

func (o *opErrors) count(k string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.got[k]
}

// A pool's heartbeat writes one registry per key prefix; a failure is
// reported by a queue under that prefix, not by whichever line came first.
func TestFaultHeartbeatErrorNamesItsQueue(t *testing.T) {
	t.Parallel()
	srv := testredis.StartServer(t)
	admin := srv.Client(nil)
	ctx := testCtx(t)
	// A user that may touch its queue's keys but not the registry's
	// ("pb:{workers}:..."), which the heartbeat writes.
	if err := admin.Do(ctx, "ACL", "SETUSER", "noregistry", "on", ">pw", "~pb:{q:*", "&*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	obs := &opErrors{}
	good, err := New(admin, "good", Options{Prefix: "pa", Observer: obsOf(obs), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	c := srv.Client(&redis.Options{Username: "noregistry", Password: "pw", MaxRetries: -1})
	bad, err := New(c, "nobeat", Options{Prefix: "pb", Observer: obsOf(obs), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPool(PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []*Queue{good, bad} {
		if err := p.Add(q, func(context.Context, *Task) error { return nil }, QueueOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	defer func() { cancel(); <-done }()
	for deadline := time.Now().Add(5 * time.Second); obs.count("nobeat heartbeat") == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no heartbeat error named the queue whose registry failed: %v", obs)
		}
	}
	if n := obs.count("good heartbeat"); n != 0 {
		t.Fatalf("the queue whose registry works reported %d heartbeat errors", n)
	}
}

// A Run that ends because its ctx's deadline passed reports no error:
// the wake loop's BLPOP, cut by that deadline on the socket, may fail
// before ctx.Err() says so, and that is the shutdown, not a Redis error.
func TestFaultDeadlineEndsRunQuietly(t *testing.T) {
	t.Parallel()
	b := testredis.Redis(t)
	logs := &records{}
	rec := &Recorder{}
	p, err := NewPool(PoolOptions{Heartbeat: -1})
	if err != nil {
		t.Fatal(err)
	}
	// Eight wake loops: each one's BLPOP is blocked when the deadline
	// comes, and each races it.
	for i := range 8 {
		q := namedQ(t, b, fmt.Sprintf("deadline%d", i), Options{Logger: slog.New(logs), Observer: obsOf(rec)})
		if err := p.Add(q, func(context.Context, *Task) error { return nil }, QueueOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Half a second: the wake loops are blocked in BLPOP (WakeBlock 1 s)
	// when the deadline comes.
	ctx, cancel := context.WithTimeout(testCtx(t), 500*time.Millisecond)
	defer cancel()
	if err := p.Run(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want the deadline", err)
	}
	if n := rec.Errors.Load(); n != 0 {
		t.Fatalf("a deadline reported %d errors: %q", n, logs.text())
	}
}

// The default logger reports a queue's errors once per kind every
// logEvery, the count suppressed in between carried by the next line.
func TestLogObserverLimitsEachKind(t *testing.T) {
	t.Parallel()
	logs := &records{}
	o := newLogObserver(Observer{}, slog.New(logs))
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
	o = newLogObserver(rec.Observer(), slog.New(logs))
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

// A loss of one kind does not hide a loss of another for the interval,
// and what an interval suppressed is logged when it ends even if nothing
// follows: a burst of losses is never logged as its first event alone.
func TestLogLossesNeverHidden(t *testing.T) {
	t.Parallel()
	logs := &records{}
	rec := &Recorder{}
	o := newLogObserver(rec.Observer(), slog.New(logs))
	o.every = 50 * time.Millisecond
	o.OnLoss("q", ErrIndexLost, 1)
	o.OnLoss("q", fmt.Errorf("%w: 500 tasks", ErrRecordLost), 500)
	if got := logs.text(); len(got) != 2 || !strings.Contains(got[1], "tasks=500") {
		t.Fatalf("an index loss hid a record loss: %q", got)
	}
	// Two more record losses in the interval, then nothing: the last is
	// logged when the interval ends, with the one before it counted.
	o.OnLoss("q", ErrRecordLost, 7)
	o.OnLoss("q", ErrRecordLost, 3)
	o.OnError("q", "take", errors.New("boom")) // another kind, logged at once
	o.OnError("q", "take", errors.New("boom again"))
	want := []string{"tasks=3 err=delay: task record lost suppressed=1 suppressed_tasks=7", "err=boom again"}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		got := logs.text()
		if len(got) == 5 {
			tail := strings.Join(got[3:], "\n")
			for _, w := range want {
				if !strings.Contains(tail, w) {
					t.Fatalf("the suppressed events were logged as %q, want %q", got[3:], want)
				}
			}
			break
		}
		if len(got) > 5 || time.Now().After(deadline) {
			t.Fatalf("logged %d lines, want 5: %q", len(got), got)
		}
	}
	if n := rec.Losses.Load(); n != 511 {
		t.Fatalf("the caller's Observer saw %d lost tasks, want 511", n)
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
	lo, ok := o.obs.(*logObserver)
	if !ok || lo.log != slog.Default() {
		t.Fatalf("default observer %T does not log to slog.Default()", o.obs)
	}
	again, err := o.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if again.obs != o.obs {
		t.Fatal("withDefaults wrapped the logging Observer twice")
	}
	d := newLogObserver(Observer{}, slog.New(slog.DiscardHandler))
	d.OnError("q", "take", errors.New("boom"))
	if len(d.last) != 0 {
		t.Fatal("a discarding logger still tracked the kind")
	}
}
