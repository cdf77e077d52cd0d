package periodic

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tierset/tierset/internal/testredis"
)

// ptrSchedule is a Schedule with a pointer receiver: a typed nil of it
// in a Job is a non-nil interface whose Next dereferences nil.
type ptrSchedule struct{ d time.Duration }

func (p *ptrSchedule) Next(t time.Time) time.Time { return t.Truncate(p.d).Add(p.d) }

// ending ticks once, then says "no more ticks" (zero Time).
type ending struct{}

func (ending) Next(t time.Time) time.Time {
	if t.Before(time.Unix(1, 0)) {
		return time.Unix(1, 0)
	}
	return time.Time{}
}

// Edges of Add's input: a typed-nil Schedule is refused as a
// *ValidationError (not a panic), and the stated limits themselves
// (MaxNameBytes, MaxCatchUp, MinPeriod) are accepted.
func TestAdvInputEdges(t *testing.T) {
	b := testredis.Mini(t)
	q := newQueue(t, b)
	s, err := New(q, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var typedNil *ptrSchedule
	nameAtMax := strings.Repeat("n", MaxNameBytes)
	// MaxNameBytes counts bytes: 64 two-byte runes are 128 bytes.
	utf8AtMax := strings.Repeat("é", MaxNameBytes/2)
	rows := []struct {
		name string
		job  Job
		want error // nil: accepted
	}{
		{"typed-nil schedule", Job{Name: "tn", Schedule: typedNil}, &ValidationError{Field: "schedule"}},
		{"schedule with no tick", Job{Name: "end", Schedule: ending{}}, &ValidationError{Field: "schedule"}},
		{"name of MaxNameBytes", Job{Name: nameAtMax, Schedule: Every(time.Second)}, nil},
		{"UTF-8 name of MaxNameBytes", Job{Name: utf8AtMax, Schedule: Every(time.Second)}, nil},
		{"UTF-8 name over MaxNameBytes", Job{Name: utf8AtMax + "x", Schedule: Every(time.Second)}, &ValidationError{Field: "name"}},
		{"invalid UTF-8 name", Job{Name: "a\xffb", Schedule: Every(time.Second)}, &ValidationError{Field: "name"}},
		{"MaxCatchUp at the cap", Job{Name: "cap", Schedule: Every(time.Second), CatchUp: CatchUpAll, MaxCatchUp: MaxCatchUp}, nil},
		{"negative MaxCatchUp", Job{Name: "neg", Schedule: Every(time.Second), CatchUp: CatchUpAll, MaxCatchUp: -1}, &ValidationError{Field: "catchup"}},
		{"period of MinPeriod", Job{Name: "min", Schedule: Every(MinPeriod)}, nil},
		{"negative period", Job{Name: "negp", Schedule: Every(-time.Second)}, &ValidationError{Field: "schedule"}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						err = fmt.Errorf("panic: %v", p)
					}
				}()
				err = s.Add(r.job)
			}()
			if r.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, r.want) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("%v, want %v matching ErrInvalid", err, r.want)
			}
		})
	}
}

// A huge period (the largest Duration) is either refused as a
// *ValidationError or runs: a pass neither panics nor enqueues a tick
// that is not one of the schedule's, and List reports a Next after Last.
func TestAdvHugePeriod(t *testing.T) {
	for _, d := range []time.Duration{100 * 365 * 24 * time.Hour, time.Duration(math.MaxInt64)} {
		t.Run(d.String(), func(t *testing.T) {
			b := testredis.Mini(t)
			ctx := testredis.Ctx(t)
			q := newQueue(t, b)
			s, err := New(q, Options{Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			var addErr error
			func() {
				defer func() {
					if p := recover(); p != nil {
						addErr = fmt.Errorf("panic: %v", p)
					}
				}()
				addErr = s.Add(Job{Name: "j", Schedule: Every(d)})
			}()
			if addErr != nil {
				if !errors.Is(addErr, ErrInvalid) {
					t.Fatalf("Add: %v, want accepted or ErrInvalid", addErr)
				}
				return
			}
			b.Mini.SetTime(t0)
			st := &stepper{s: s, r: &runner{s: s}}
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("pass panicked: %v", p)
					}
				}()
				st.step(ctx)
			}()
			infos, err := lookup(ctx, q, "j")
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range infos {
				t.Errorf("a task %q due %v for a schedule with no tick before %v", in.Token, in.When, time.Unix(0, 0).Add(d))
			}
			jobs, err := List(ctx, q)
			if err != nil || len(jobs) != 1 {
				t.Fatalf("List: %+v %v", jobs, err)
			}
			if n := jobs[0].Next; !n.IsZero() && !n.After(jobs[0].Last) {
				t.Errorf("List: Next %v not after Last %v", n, jobs[0].Last)
			}
		})
	}
}
