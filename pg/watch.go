package pg

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/warm"
)

// RulesChannel is the channel the promotions triggers notify.
const RulesChannel = "tierset_rules"

// DefaultKeepTombstones is the default WatchOptions.KeepTombstones: as
// long as the cache's own tombstones (cache.Options.TombstoneTTL, 24h by default), far
// longer than any load or warm-up in flight, and bounded because every
// full pass re-applies each kept deletion (one cache.Delete each).
const DefaultKeepTombstones = 24 * time.Hour

// WatchOptions configure Watch. The zero value is the default.
type WatchOptions struct {
	// FullEvery is the period of the full pass (warm.FromSource over every
	// promotion) that catches what a lost notification missed. A full pass
	// also runs at start and after every reconnect. Default 5 minutes.
	FullEvery time.Duration
	// Warm configures the full passes. With Warm.Prune a full pass also
	// deletes stored promotions whose rows are gone; without it only a
	// notification deletes. Default: no pruning.
	Warm warm.Options
	// ReconnectMin and ReconnectMax bound the doubling wait between
	// attempts to reconnect the listener. Defaults 100 ms and 5 s.
	ReconnectMin, ReconnectMax time.Duration
	// KeepTombstones is how long the tombstones of deleted promotions
	// (their deletion's revision) are kept in the database; each full
	// pass purges older ones. A full pass or one-shot warm-up applies the
	// deletions it finds in order, so a deletion whose notification was
	// lost reaches Redis at the next full pass if that comes within
	// KeepTombstones (later, only Warm.Prune removes it). Negative keeps
	// them forever. Default DefaultKeepTombstones (24 hours).
	KeepTombstones time.Duration
	// OnEvent, when set, is called (from Watch's goroutine, so it must
	// not block long) with everything Watch does. Default nil.
	OnEvent func(WatchEvent)
}

// WatchEventKind says what a WatchEvent reports.
type WatchEventKind uint8

// Watch events.
const (
	WatchListening WatchEventKind = iota + 1 // the listener connected (PID set)
	WatchRefreshed                           // one promotion refreshed (ID, Outcome, Version, Revision); Outcome Stale: Redis held a newer revision
	WatchDeleted                             // one promotion's row is gone: deleted from Redis (ID, Outcome Deleted, Absent or Stale; Revision)
	WatchSkipped                             // one promotion gradient refuses: Redis left as it was (ID, Err)
	WatchFullPass                            // a full pass ran (Summary, Err)
	WatchError                               // a failure Watch recovers from (Err; ID when about one promotion)
)

func (k WatchEventKind) String() string {
	switch k {
	case WatchListening:
		return "listening"
	case WatchRefreshed:
		return "refreshed"
	case WatchDeleted:
		return "deleted"
	case WatchSkipped:
		return "skipped"
	case WatchFullPass:
		return "full-pass"
	case WatchError:
		return "error"
	}
	return fmt.Sprintf("watch-event(%d)", uint8(k))
}

// WatchEvent is one thing Watch did.
type WatchEvent struct {
	Kind    WatchEventKind
	ID      string
	PID     uint32
	Outcome cache.RefreshOutcome
	Version string
	// Revision is the promotion's revision written, or the deletion's;
	// when Outcome is Stale, the newer one Redis holds.
	Revision int64
	Summary  warm.Summary
	Err      error
	At       time.Time
}

type notice struct{ Schema, ID string }

// Watch keeps c in step with r until ctx ends, and returns ctx's error. It
// LISTENs on RulesChannel on a connection of its own (made from pool's
// config, so it takes nothing from the pool) and, for each committed
// change to one of r's promotions, reloads just that promotion: Refresh
// when it is valid, cache.Delete (readers keep its grace) when its row
// is gone, nothing when gradient refuses it (reported as WatchSkipped).
// Every write carries the revision read with the rows (a deletion, its
// tombstone's), so Redis never goes back to an older version whatever
// the order in which Watch, another watcher or a one-shot warm-up write:
// an older write is reported with Outcome cache.Stale.
// A full pass runs at start, after each reconnect and every FullEvery.
// When the listener's connection drops, Watch reconnects with backoff.
func Watch(ctx context.Context, pool *pgxpool.Pool, r *Rules, c warm.Cache, opts WatchOptions) error {
	if pool == nil || r == nil || c == nil {
		return invalid("options", "nil pool, rules or cache")
	}
	opts.FullEvery = cmp.Or(opts.FullEvery, 5*time.Minute)
	opts.ReconnectMin = cmp.Or(opts.ReconnectMin, 100*time.Millisecond)
	opts.ReconnectMax = cmp.Or(opts.ReconnectMax, 5*time.Second)
	opts.KeepTombstones = cmp.Or(opts.KeepTombstones, DefaultKeepTombstones)
	if opts.FullEvery < 0 || opts.ReconnectMin < 0 || opts.ReconnectMax < opts.ReconnectMin {
		return invalid("options", "full every %v, reconnect %v..%v (want non-negative, min <= max)", opts.FullEvery, opts.ReconnectMin, opts.ReconnectMax)
	}
	w := watcher{pool: pool, r: r, c: c, o: opts}
	backoff := opts.ReconnectMin
	for {
		err := w.listen(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		w.emit(WatchEvent{Kind: WatchError, Err: fmt.Errorf("pg: watch: listener: %w", err)})
		if w.listened {
			backoff = opts.ReconnectMin
		}
		if err := sleep(ctx, backoff); err != nil {
			return err
		}
		backoff = min(2*backoff, opts.ReconnectMax)
	}
}

type watcher struct {
	pool     *pgxpool.Pool
	r        *Rules
	c        warm.Cache
	o        WatchOptions
	listened bool // the last listen got as far as LISTEN
}

func (w *watcher) emit(e WatchEvent) {
	if w.o.OnEvent != nil {
		e.At = time.Now()
		w.o.OnEvent(e)
	}
}

// listen connects, LISTENs, runs a full pass and serves notifications
// until the connection fails or ctx ends.
func (w *watcher) listen(ctx context.Context) error {
	w.listened = false
	conn, err := pgx.ConnectConfig(ctx, w.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+RulesChannel); err != nil {
		return err
	}
	w.listened = true
	w.emit(WatchEvent{Kind: WatchListening, PID: conn.PgConn().PID()})
	w.fullPass(ctx)
	next := time.Now().Add(w.o.FullEvery)
	for {
		wctx, cancel := context.WithDeadline(ctx, next)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			w.fullPass(ctx)
			next = time.Now().Add(w.o.FullEvery)
			continue
		case err != nil:
			return err
		}
		var nt notice
		if err := json.Unmarshal([]byte(n.Payload), &nt); err != nil {
			w.emit(WatchEvent{Kind: WatchError, Err: fmt.Errorf("pg: watch: notification %q: %w", n.Payload, err)})
			continue
		}
		if nt.Schema == w.r.schema && nt.ID != "" {
			w.refreshOne(ctx, nt.ID)
		}
	}
}

func (w *watcher) fullPass(ctx context.Context) {
	sum, err := warm.FromSource(ctx, w.c, w.r, w.o.Warm)
	w.emit(WatchEvent{Kind: WatchFullPass, Summary: sum, Err: err})
	if w.o.KeepTombstones > 0 {
		if _, err := w.r.PurgeTombstones(ctx, time.Now().Add(-w.o.KeepTombstones)); err != nil {
			w.emit(WatchEvent{Kind: WatchError, Err: err})
		}
	}
}

// refreshOne brings one promotion in Redis to its rows' state. A failure
// is reported; the next full pass repairs it.
func (w *watcher) refreshOne(ctx context.Context, id string) {
	p, found, err := w.r.LoadOne(ctx, id)
	switch {
	case errors.Is(err, &ValidationError{Field: "row"}):
		w.emit(WatchEvent{Kind: WatchSkipped, ID: id, Err: err})
	case err != nil:
		w.emit(WatchEvent{Kind: WatchError, ID: id, Err: err})
	case !found:
		res, err := w.c.Delete(ctx, id, p.Revision)
		if err != nil {
			w.emit(WatchEvent{Kind: WatchError, ID: id, Err: fmt.Errorf("pg: watch: delete %q: %w", id, err)})
			return
		}
		w.emit(WatchEvent{Kind: WatchDeleted, ID: id, Outcome: res.Outcome, Revision: res.Revision})
	default:
		rep, err := w.c.Refresh(ctx, p)
		if err == nil && len(rep.Promotions) != 1 {
			err = fmt.Errorf("%d results for one promotion", len(rep.Promotions))
		}
		if err != nil {
			w.emit(WatchEvent{Kind: WatchError, ID: id, Err: fmt.Errorf("pg: watch: refresh %q: %w", id, err)})
			return
		}
		res := rep.Promotions[0]
		w.emit(WatchEvent{Kind: WatchRefreshed, ID: id, Outcome: res.Outcome, Version: res.Version, Revision: res.Revision})
	}
}
