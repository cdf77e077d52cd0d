// Package console is tierset's operator console: an http.Handler over the
// public API of the delay and cache packages. `tierset web` serves it; a
// service can mount it too:
//
//	c, err := console.New(ctx, console.Options{Client: rdb, Token: token})
//	if err != nil { ... }
//	http.Handle("/", c) // its routes are absolute: mount it at the root of a host
//
// Pages (docs/console.md has them with screenshots): a summary table of
// every queue, one row each (cards too for up to 12 queues) (counts per state, paused, rate limit, live workers, the oldest
// ready task's wait and Queue.Health's verdict, which tells "no live
// worker" from "behind"); a queue page with its last 24 hours per minute
// (throughput, failures, lateness; delay.Queue.History) as SVG charts;
// browsing each state (due, scheduled, in flight, dead, done tombstones) a
// page at a time from a cursor with delay.Queue.List, filtered by
// business key prefix or error text over a bounded window; a task page; the worker pools from
// their heartbeats; dead letters; promotions with a match simulator; the
// action log (/log). Times show their zone (Options.Location, default
// UTC); durations read "2h5m"; the history charts have an hour axis and
// hover values (SVG <title>).
// For scripts, GET /api/queues, /api/tasks?queue&state[&cursor],
// /api/task?queue&id and /api/workers answer JSON with the field names
// of the tierset CLI's -json; /api/job?id a filter-wide action's progress.
//
// Every change (cancel, run now, reschedule, requeue, delete, one task or
// a selection; pause and resume; the dead-letter requeue-all and purge)
// goes through a confirm page (a dead-letter row's Requeue button posts
// at once), then a POST from the console's own origin
// carrying the CSRF token of the login's session (or, for scripts, the
// console's token in a form field with a pre-session CSRF token). Task
// actions go by task ID (delay.Selector.IDs): a task that moved on since the page was drawn is skipped.
//
// An action on every task of a state matching a filter (bulk.go) has a
// confirm page with the count matching now; its POST starts a job that
// pages through delay.Queue.List and acts on 500 task IDs per script,
// its progress in a Redis hash that GET /job?id shows, so a 100,000-task
// backlog never holds Redis or the request for its length. Tasks that
// moved on between the count and their batch are counted as skipped.
// Every change is an entry of the action log, a Redis list capped at
// 1000 entries (actionlog.go): who, what, queue, filter, counts, when.
//
// A login is a
// session kept in Redis with an absolute and an idle expiry, ended at
// logout; login attempts (and changes carrying the token in a form
// field) are rate-limited per client address and globally
// (docs/console.md, "Login and CSRF"). Off loopback every page
// needs the login. When Redis does not answer, every page is a banner and
// status 503.
package console
