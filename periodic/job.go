package periodic

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"time"

	"github.com/tierset/tierset/internal/inputerr"
	"github.com/tierset/tierset/internal/keyname"
)

var (
	// ErrInvalid: a refused input. Every such error is a *ValidationError
	// naming the input; it matches ErrInvalid.
	ErrInvalid = errors.New("periodic: invalid input")
	// ErrNotFound: no job of that name was ever declared on the queue.
	ErrNotFound = errors.New("periodic: job not found")
)

// ValidationError is a refused input: nothing was sent or written. Its
// Field is one of "name", "schedule", "period", "location", "catchup",
// "options" or "queue"; errors.Is(err, &ValidationError{Field: f}) tells
// which.
type ValidationError = inputerr.Error[input]

type input struct{}

func (input) Package() (string, error) { return "periodic", ErrInvalid }

func invalid(field, format string, args ...any) error {
	return inputerr.New[input](field, format, args...)
}

// MinPeriod is the shortest time between two ticks of a job that Add
// accepts: every declaring process calls Redis once per tick, so a
// shorter period would cost more than it could be worth.
const MinPeriod = 100 * time.Millisecond

// Schedule gives the tick after t. A robfig/cron/v3 Schedule fits, as
// does [Every]. Next must be a pure function of t (every process must
// compute the same ticks) and must advance; a zero Time means "no more
// ticks" and is refused by Add.
type Schedule interface {
	Next(t time.Time) time.Time
}

// Every is a schedule that ticks every d at the multiples of d since the
// Unix epoch (UTC), so that every process computes the same instants.
func Every(d time.Duration) Schedule { return every(d) }

type every time.Duration

func (e every) Next(t time.Time) time.Time {
	d := time.Duration(e)
	if d <= 0 {
		return t
	}
	ns := t.UnixNano()
	return time.Unix(0, (ns/int64(d)+1)*int64(d))
}

func (e every) String() string { return "every " + time.Duration(e).String() }

// CatchUp says what a job does with the ticks that passed while no
// process could enqueue them (every process down, Redis down, the job
// undeclared). It never applies to the tick due now.
type CatchUp int

const (
	// CatchUpOne, the default, enqueues the latest missed tick (due at its
	// own instant, so at once) and drops the others.
	CatchUpOne CatchUp = iota
	// CatchUpSkip enqueues a missed tick only while it is at most
	// Job.Grace late; older ticks are dropped.
	CatchUpSkip
	// CatchUpAll enqueues every missed tick, oldest first, at most
	// Job.MaxCatchUp of them besides the latest; older ones are dropped.
	CatchUpAll
)

func (c CatchUp) String() string {
	switch c {
	case CatchUpOne:
		return "one"
	case CatchUpSkip:
		return "skip"
	case CatchUpAll:
		return "all"
	}
	return "catchup(" + strconv.Itoa(int(c)) + ")"
}

// Limits of a Job.
const (
	// MaxNameBytes is the longest job name.
	MaxNameBytes = 128
	// MaxCatchUp caps Job.MaxCatchUp: a delay queue holds at most 64
	// tasks per business key, and a job's tasks share its name.
	MaxCatchUp = 50
)

// Job is a periodic job, declared alike by every process that runs it.
type Job struct {
	// Name is the job's name, the business key of its tasks: 1..MaxNameBytes
	// bytes of UTF-8 without braces, glob characters, whitespace or
	// control characters.
	Name string
	// Schedule gives the ticks; see Every and contrib/cron.
	Schedule Schedule
	// Payload is every task's payload.
	Payload []byte
	// Spec describes the schedule to operators. Defaults to the
	// schedule's String method, or its Go type.
	Spec string
	// CatchUp is the policy for missed ticks. Defaults to CatchUpOne.
	CatchUp CatchUp
	// MaxCatchUp bounds CatchUpAll: the most missed ticks enqueued
	// besides the latest, 0..MaxCatchUp. Defaults to 10.
	MaxCatchUp int
	// Grace is how late a tick may be and still be enqueued under
	// CatchUpSkip. Defaults to 1s.
	Grace time.Duration
}

func checkName(name string) error {
	if err := keyname.Check(name); err != nil || len(name) > MaxNameBytes {
		if err == nil {
			err = fmt.Errorf("%d bytes (max %d)", len(name), MaxNameBytes)
		}
		return invalid("name", "%w", err)
	}
	return nil
}

// sampleFrom are the instants from which a schedule's ticks are sampled
// for its definition digest: far apart, so that schedules that differ
// only some days of a year or in a time zone still differ in the digest.
var sampleFrom = [...]int64{978307200, 1371299696, 1774742400, 1792789200}

// checked validates j against now (Redis TIME) and fills its defaults;
// def is its definition digest.
func (j Job) checked(now time.Time) (Job, string, error) {
	if err := checkName(j.Name); err != nil {
		return j, "", err
	}
	if isNilSchedule(j.Schedule) {
		return j, "", invalid("schedule", "job %q: nil schedule", j.Name)
	}
	switch j.CatchUp {
	case CatchUpOne, CatchUpSkip, CatchUpAll:
	default:
		return j, "", invalid("catchup", "job %q: unknown policy %d", j.Name, int(j.CatchUp))
	}
	if j.MaxCatchUp < 0 || j.MaxCatchUp > MaxCatchUp {
		return j, "", invalid("catchup", "job %q: MaxCatchUp %d (allowed 0..%d)", j.Name, j.MaxCatchUp, MaxCatchUp)
	}
	if j.MaxCatchUp == 0 {
		j.MaxCatchUp = 10
	}
	if j.Grace < 0 {
		return j, "", invalid("catchup", "job %q: Grace %v", j.Name, j.Grace)
	}
	if j.Grace == 0 {
		j.Grace = time.Second
	}
	// 16 ticks from now: each must advance, each gap after the first be
	// at least MinPeriod
	t := now
	for i := range 16 {
		n := j.Schedule.Next(t)
		if !n.After(t) {
			return j, "", invalid("schedule", "job %q: Next(%v) = %v does not advance", j.Name, t, n)
		}
		if i > 0 && n.Sub(t) < MinPeriod {
			return j, "", invalid("period", "job %q: %v between ticks %v and %v (min %v)", j.Name, n.Sub(t), t, n, MinPeriod)
		}
		t = n
	}
	if j.Spec == "" {
		if s, ok := j.Schedule.(fmt.Stringer); ok {
			j.Spec = s.String()
		} else {
			j.Spec = fmt.Sprintf("%T", j.Schedule)
		}
	}
	return j, j.digest(), nil
}

// digest is the job's definition: what it does, not how it is written,
// so that processes built apart agree. Two definitions of one name live
// at once are a schedule change in a rolling deploy (docs/design.md,
// "Periodic jobs").
func (j Job) digest() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%d\x00%d\x00%d\x00", j.Name, len(j.Payload), j.CatchUp, j.MaxCatchUp, j.Grace)
	h.Write(j.Payload)
	for _, s := range sampleFrom {
		t := time.Unix(s, 0)
		for range 8 {
			t = j.Schedule.Next(t)
			fmt.Fprintf(h, "%d,", t.UnixNano())
			if t.IsZero() {
				break
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// isNilSchedule reports whether s is nil or holds a nil pointer, func,
// map, channel or slice: a typed nil passes s == nil and would panic in
// Next, in Add or later in Run's goroutine.
func isNilSchedule(s Schedule) bool {
	if s == nil {
		return true
	}
	switch rv := reflect.ValueOf(s); rv.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Map, reflect.Chan, reflect.Slice, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
