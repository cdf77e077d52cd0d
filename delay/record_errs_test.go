package delay

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

// TestDecodeErrs: the err field of a record is a list of texts, one bare
// text (every record written before lists were kept) or empty; a field
// that is not a whole list reads as one bare text.
func TestDecodeErrs(t *testing.T) {
	t.Parallel()
	m := string(rune(errMark))
	tests := []struct {
		name, field string
		want        []string
	}{
		{"empty", "", nil},
		{"old bare text", "gateway said 501", []string{"gateway said 501"}},
		{"old bare text with a colon and digits", "5:boom", []string{"5:boom"}},
		{"one listed", m + "4:boom", []string{"boom"}},
		{"three listed", m + "2:e1" + m + "0:" + m + "3:e:3", []string{"e1", "", "e:3"}},
		{"text holding the mark", m + "3:a" + m + "b", []string{"a" + m + "b"}},
		{"length past the end: bare", m + "9:boom", []string{m + "9:boom"}},
		{"no colon: bare", m + "4boom", []string{m + "4boom"}},
		{"trailing bytes: bare", m + "1:ax", []string{m + "1:ax"}},
		{"mark alone: bare", m, []string{m}},
		{"huge length: bare", m + "99999999:x", []string{m + "99999999:x"}},
	}
	for _, tt := range tests {
		if got := decodeErrs(tt.field); !slices.Equal(got, tt.want) {
			t.Errorf("%s: decodeErrs(%q) = %q, want %q", tt.name, tt.field, got, tt.want)
		}
		if len(tt.want) == 1 && !strings.HasPrefix(tt.field, m) {
			if enc := encodeErrs(tt.want); enc != tt.field {
				t.Errorf("%s: one bare text encodes as %q, want it as it is", tt.name, enc)
			}
		}
	}
	// A record of either form decodes whole, LastError the newest text.
	for _, errs := range [][]string{nil, {"only"}, {"a", "b", "c"}} {
		r := record{flags: flagSole, digest: digest("k"), key: "k", errs: errs, payload: []byte("p")}
		rec, err := decodeRecord(encodeRecord(r), 0)
		want := ""
		if len(errs) > 0 {
			want = errs[len(errs)-1]
		}
		if err != nil || !slices.Equal(rec.errs, errs) || rec.err != want || string(rec.payload) != "p" {
			t.Errorf("record with errors %q: %+v, %v", errs, rec, err)
		}
	}
}

// TestLastErrorsKept: retries, a kill and a nil cause add to the record's
// last errors, the oldest dropped past errsKept texts or errsBytes bytes;
// a record in the old form (one bare error) keeps its error as the oldest.
// Task, Lookup, Browse and ListDead show the same list.
func TestLastErrorsKept(t *testing.T) {
	t.Parallel()
	big := func(c byte) string { return strings.Repeat(string(c), 1000) }
	tests := []struct {
		name string
		// old is the bare error planted in the record before the first
		// retry, as a record written before lists were kept holds it.
		old     string
		retries []error
		kill    error
		want    []string
	}{
		{"one", "", []error{errors.New("e1")}, nil, []string{"e1"}},
		{"three of five", "", []error{errors.New("e1"), errors.New("e2"), errors.New("e3"), errors.New("e4"), errors.New("e5")}, nil, []string{"e3", "e4", "e5"}},
		{"kill adds the last", "", []error{errors.New("e1"), errors.New("e2"), errors.New("e3")}, errors.New("fatal"), []string{"e2", "e3", "fatal"}},
		{"nil cause adds an empty text", "", []error{errors.New("e1"), nil}, nil, []string{"e1", ""}},
		{"bytes bound", "", []error{errors.New(big('a')), errors.New(big('b')), errors.New(big('c'))}, nil, []string{big('b'), big('c')}},
		{"old record", "gateway said 501", []error{errors.New("e1")}, nil, []string{"gateway said 501", "e1"}},
		{"old record with a mark", string(rune(errMark)) + "x", []error{errors.New("e1")}, nil, []string{string(rune(errMark)) + "x", "e1"}},
	}
	eachQueue(t, Options{MaxAttempts: 100}, func(t *testing.T, ctx context.Context, b *testredis.Backend, q *Queue) {
		for _, tc := range tests {
			key := "k-" + strings.ReplaceAll(tc.name, " ", "-")
			e := mustEnqueue(t, ctx, q, Job{Key: key})
			if tc.old != "" {
				blob, err := b.Client.HGet(ctx, q.k.taskBucket(e.ID), e.ID).Result()
				if err != nil {
					t.Fatal(err)
				}
				rec, err := decodeRecord(blob, 0)
				if err != nil {
					t.Fatal(err)
				}
				rec.err, rec.errs = tc.old, nil // written as the old format did
				if err := b.Client.HSet(ctx, q.k.taskBucket(e.ID), e.ID, encodeRecord(rec)).Err(); err != nil {
					t.Fatal(err)
				}
				if ti, err := q.Task(ctx, e.ID); err != nil || !slices.Equal(ti.LastErrors, []string{tc.old}) || ti.LastError != tc.old {
					t.Fatalf("%s: planted old record reads %q / %q, %v", tc.name, ti.LastErrors, ti.LastError, err)
				}
			}
			for i, cause := range tc.retries {
				tk := takeID(t, q, e.ID)
				if out, err := q.retryAfter(ctx, tk, 0, cause); err != nil || out != outcomeRetried {
					t.Fatalf("%s: retry %d: %v, %v", tc.name, i, out, err)
				}
			}
			wantState := StatePending
			if tc.kill != nil {
				tk := takeID(t, q, e.ID)
				if out, err := q.killTask(ctx, tk, tc.kill); err != nil || out != outcomeDead {
					t.Fatalf("%s: kill: %v, %v", tc.name, out, err)
				}
				wantState = StateDead
			}
			ti, err := q.Task(ctx, e.ID)
			if err != nil || inSet(ti.State) != wantState || !slices.Equal(ti.LastErrors, tc.want) || ti.LastError != tc.want[len(tc.want)-1] {
				t.Errorf("%s: Task: state %s, LastErrors %q, LastError %q, %v; want %s, %q", tc.name, ti.State, ti.LastErrors, ti.LastError, err, wantState, tc.want)
			}
			look, err := lookup(ctx, q, key)
			if err != nil || len(look) != 1 || !slices.Equal(look[0].LastErrors, tc.want) {
				t.Errorf("%s: Lookup: %+v, %v", tc.name, look, err)
			}
			if tc.kill != nil {
				if ti.Attempt != len(tc.retries)+1 {
					t.Errorf("%s: %d attempts, want %d", tc.name, ti.Attempt, len(tc.retries)+1)
				}
				continue
			}
			// the record is not the only place: a listing by state reads it too
			ov, err := q.List(ctx, ListOptions{State: StatePending, Limit: MaxBatch})
			found := false
			for _, d := range ov.Tasks {
				if d.ID == e.ID {
					found = slices.Equal(d.LastErrors, tc.want)
				}
			}
			if err != nil || !found {
				t.Errorf("%s: List: task %s not listed with %q (%v)", tc.name, e.ID, tc.want, err)
			}
			// done with it: leave it out of the next row's takes
			if _, err := q.Cancel(ctx, Selector{Key: key}); err != nil {
				t.Fatal(err)
			}
		}
		dead, err := listDead(ctx, q, 0, MaxBatch)
		if err != nil || len(dead.Tasks) != 1 || !slices.Equal(dead.Tasks[0].LastErrors, []string{"e2", "e3", "fatal"}) || dead.Tasks[0].LastError != "fatal" {
			t.Errorf("ListDead: %+v, %v", dead, err)
		}
	})
}

// takeID takes tasks until it holds id, within 5 s; the queue holds no
// other due task, so the first take normally has it.
func takeID(t *testing.T, q *Queue, id string) *Task {
	t.Helper()
	ctx := testCtx(t)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		b := mustTake(t, ctx, q, 1)
		for _, tk := range b.Tasks {
			if tk.ID == id {
				return tk
			}
			t.Fatalf("took %s, want %s: the queue holds another due task", tk.ID, id)
		}
	}
	t.Fatalf("task %s was not due within 5 s", id)
	return nil
}
