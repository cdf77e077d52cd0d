package periodic

import (
	"bytes"
	"context"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/testredis"
)

// t0 is a controlled Redis TIME, a multiple of 3 s (Every(1s) and
// Every(1500ms) both tick on it).
var t0 = time.Unix(1_800_000_000, 0)

func newQueue(t *testing.T, b *testredis.Backend) *delay.Queue {
	t.Helper()
	q, err := delay.New(b.Client, "q", delay.Options{Prefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// logBuf is a slog text sink the test reads.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// stepper drives one Scheduler's passes by hand, for tests that set
// Redis TIME (miniredis SetTime): each step declares (measuring Redis
// TIME) and handles what is due.
type stepper struct {
	s *Scheduler
	r *runner
}

func newStepper(t *testing.T, q *delay.Queue, o Options, jobs ...Job) *stepper {
	t.Helper()
	s, err := New(q, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if err := s.Add(j); err != nil {
			t.Fatal(err)
		}
	}
	return &stepper{s: s, r: &runner{s: s}}
}

func (st *stepper) step(ctx context.Context) {
	st.r.beat = 0
	st.r.pass(ctx)
}

// ticksOf is the tick (token, as offset from t0 in ms) of every task of
// job in q, sorted, and fails on two tasks of one tick.
func ticksOf(t *testing.T, ctx context.Context, q *delay.Queue, job string) []int64 {
	t.Helper()
	infos, err := lookup(ctx, q, job)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []int64
	for _, in := range infos {
		if seen[in.Token] {
			t.Fatalf("tick %s has two tasks", in.Token)
		}
		seen[in.Token] = true
		ms, err := strconv.ParseInt(in.Token, 10, 64)
		if err != nil {
			t.Fatalf("token %q: %v", in.Token, err)
		}
		if !in.When.Equal(time.UnixMilli(ms)) {
			t.Fatalf("task of tick %s due %v, want its tick", in.Token, in.When)
		}
		out = append(out, ms-t0.UnixMilli())
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func slogTo(w *logBuf) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// lookup is every task of key in q (List by key).
func lookup(ctx context.Context, q *delay.Queue, key string) ([]delay.TaskInfo, error) {
	p, err := q.List(ctx, delay.ListOptions{Key: key})
	return p.Tasks, err
}
