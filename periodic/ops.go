package periodic

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/delay"
)

// ErrDeclared is Forget's refusal: a live process declares the job.
var ErrDeclared = errors.New("periodic: job declared by a live process")

// List returns every job declared on q and not forgotten, by name, as
// Redis holds it now: spec and catch-up policy, last and next tick, the
// pause, the live processes declaring it (each with when it last
// declared), and whether a schedule change is under way. One call for a
// console page, a CLI listing or a metrics scrape.
func List(ctx context.Context, q *delay.Queue) ([]JobInfo, error) {
	k, err := keysOf(q)
	if err != nil {
		return nil, err
	}
	c := q.Client()
	names, err := c.SMembers(ctx, k.index()).Result()
	if err != nil {
		return nil, fmt.Errorf("periodic: list: %w", err)
	}
	sort.Strings(names)
	var tm *redis.TimeCmd
	hs := make([]*redis.MapStringStringCmd, len(names))
	_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		tm = p.Time(ctx)
		for i, n := range names {
			hs[i] = p.HGetAll(ctx, k.job(n))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("periodic: list: %w", err)
	}
	out := make([]JobInfo, 0, len(names))
	for i, n := range names {
		out = append(out, parseState(hs[i].Val(), tm.Val()).info(n))
	}
	return out, nil
}

// Pause pauses the job name on q for every process, judged in Redis by
// the tick script, so processes started later obey it too. While paused
// each tick that comes passes without a task (the guard moves on): a
// resume brings no burst, whatever the job's CatchUp, which governs only
// ticks no process was there to handle. Tasks already enqueued are left
// alone. Pausing a paused job keeps its first PausedSince.
func Pause(ctx context.Context, q *delay.Queue, name string) error {
	return setPaused(ctx, q, name, true)
}

// Resume undoes Pause: the next tick after the resume makes a task.
func Resume(ctx context.Context, q *delay.Queue, name string) error {
	return setPaused(ctx, q, name, false)
}

// known checks q and name and that name is a job of q: ErrNotFound if
// no process declared it there (or it was forgotten).
func known(ctx context.Context, q *delay.Queue, name, op string) (keys, error) {
	k, err := keysOf(q)
	if err != nil {
		return k, err
	}
	if err := checkName(name); err != nil {
		return k, err
	}
	ok, err := q.Client().SIsMember(ctx, k.index(), name).Result()
	if err != nil {
		return k, fmt.Errorf("periodic: %s %q: %w", op, name, err)
	}
	if !ok {
		return k, fmt.Errorf("%w: %q on queue %q", ErrNotFound, name, q.Name())
	}
	return k, nil
}

func setPaused(ctx context.Context, q *delay.Queue, name string, on bool) error {
	op := "resume"
	if on {
		op = "pause"
	}
	k, err := known(ctx, q, name, op)
	if err != nil {
		return err
	}
	c := q.Client()
	if !on {
		err = c.HDel(ctx, k.job(name), "paused").Err()
	} else {
		// the first pause's time is kept; Redis TIME, not this clock
		var now time.Time
		if now, err = c.Time(ctx).Result(); err == nil {
			err = c.HSetNX(ctx, k.job(name), "paused", now.UnixMilli()).Err()
		}
	}
	if err != nil {
		return fmt.Errorf("periodic: %s %q: %w", op, name, err)
	}
	return nil
}

// maxForgetTries bounds Forget's optimistic transaction against
// declarations written meanwhile.
const maxForgetTries = 5

// forgetKeep is how long Forget's tombstone (the time it ran) outlives
// it: a process frozen since before the Forget that thaws within it
// starts the job over instead of catching up ticks others handled.
const forgetKeep = 7 * 24 * time.Hour

// Forget deletes the stored state of the job name on q (its guard, pause
// and definitions) and drops it from List, once no live process
// declares it: while one does, it refuses with ErrDeclared, naming the
// processes, and changes nothing. The check and the delete are one
// transaction (WATCH), so a process declaring meanwhile either comes
// first, and Forget refuses, or finds the job new. A process that
// declares the job after Forget starts it over from its next tick (no
// catch-up: its old ticks are not known any more), also one that
// declared it before and was frozen through the Forget: a tombstone of
// the Forget's time, kept for 7 days, tells it so. The job's tasks
// already in the queue are left alone.
func Forget(ctx context.Context, q *delay.Queue, name string) error {
	k, err := known(ctx, q, name, "forget")
	if err != nil {
		return err
	}
	c := q.Client()
	st := k.job(name)
	for range maxForgetTries {
		var live []string
		err = c.Watch(ctx, func(tx *redis.Tx) error {
			now, err := tx.Time(ctx).Result()
			if err != nil {
				return err
			}
			h, err := tx.HGetAll(ctx, st).Result()
			if err != nil {
				return err
			}
			for _, d := range parseState(h, now).defs {
				for _, p := range d.Processes {
					live = append(live, p.Process)
				}
			}
			if len(live) > 0 {
				return nil
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Del(ctx, st)
				p.SRem(ctx, k.index(), name)
				p.Set(ctx, k.forgotten(name), now.UnixMilli(), forgetKeep)
				return nil
			})
			return err
		}, st)
		switch {
		case errors.Is(err, redis.TxFailedErr):
			continue // a declaration (or tick) meanwhile: look again
		case err != nil:
			return fmt.Errorf("periodic: forget %q: %w", name, err)
		case len(live) > 0:
			sort.Strings(live)
			return fmt.Errorf("%w: %q on queue %q: %s", ErrDeclared, name, q.Name(), strings.Join(live, ", "))
		}
		return nil
	}
	return fmt.Errorf("periodic: forget %q: the job's state changed on each of %d tries", name, maxForgetTries)
}
