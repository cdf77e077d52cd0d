package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/text"
)

const queueSynopsis = "tierset queue stats|dead|requeue|purge -queue NAME [-redis URL] [-prefix P] [-ids ID,...] [-limit N] [-yes]"

func cmdQueue(ctx context.Context, args []string, e *env) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fs := queueFlags()
		fs.printHelp(e.stdout)
		return errHelp
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usagef("want a subcommand: stats, dead, requeue or purge")
	}
	sub := args[0]
	switch sub {
	case "stats", "dead", "requeue", "purge":
	default:
		return usagef("unknown queue subcommand %s (want stats, dead, requeue or purge)", quoteArg(sub))
	}
	fs := queueFlags()
	if err := fs.parse(args[1:], e); err != nil {
		return err
	}
	name := fs.Lookup("queue").Value.String()
	if name == "" {
		return usagef("-queue is required")
	}
	if err := delay.ValidateName(name); err != nil {
		return usagef("-queue %s: %v", quoteArg(name), err)
	}
	redisURL := fs.Lookup("redis").Value.String()
	if redisURL == "" {
		return usagef("-redis is required: a queue lives in a real Redis")
	}
	be, err := connect(ctx, redisURL, e)
	if err != nil {
		return err
	}
	defer be.close()
	q, err := delay.New(be.client, name, delay.Options{Prefix: fs.Lookup("prefix").Value.String()})
	if err != nil {
		return usagef("%v", err)
	}
	limit := fs.Lookup("limit").Value.(interface{ Get() any }).Get().(int)
	yes := fs.Lookup("yes").Value.String() == "true"
	var ids []string
	if s := fs.Lookup("ids").Value.String(); s != "" {
		for _, id := range strings.Split(s, ",") {
			if id = strings.TrimSpace(id); id != "" {
				ids = append(ids, id)
			}
		}
	}
	switch sub {
	case "stats":
		return queueStats(ctx, q, e.stdout)
	case "dead":
		return queueDead(ctx, q, limit, e.stdout)
	default:
		return queueChange(ctx, q, sub, ids, yes, e)
	}
}

func queueFlags() *cmdFlags {
	fs := newFlags("queue", queueSynopsis)
	fs.String("queue", "", "queue `NAME`; required")
	fs.String("redis", "", "Redis `URL`, or comma-separated cluster seeds; required")
	fs.String("prefix", delay.DefaultPrefix, "key `prefix`")
	fs.String("ids", "", "requeue/purge only these dead task `IDs` (comma-separated); default all")
	fs.Int("limit", 50, "dead: list at most `N` dead letters")
	fs.Bool("yes", false, "requeue/purge without asking for confirmation")
	return fs
}

func queueStats(ctx context.Context, q *delay.Queue, w io.Writer) error {
	st, err := q.Stats(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "queue %s at %s (Redis TIME)\n", q.Name(), st.ServerTime.UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(w, "  depth:    pending %d (ready %d), in flight %d, dead %d, finished kept (DoneTTL) %d\n", st.Pending, st.Ready, st.InFlight, st.Dead, st.Done)
	fmt.Fprintf(w, "  oldest due task waiting: %s\n", st.OldestDueAge)
	fmt.Fprintf(w, "  counters: delivered %d, acked %d, retries %d, dead-lettered %d, expired leases %d, cancelled %d, corrupt %d, seq overflows %d\n",
		st.Delivered, st.Acked, st.Retries, st.DeadLettered, st.Expired, st.Cancelled, st.Corrupt, st.SeqOverflows)
	if l := st.Lateness; l.Total() > 0 {
		// The buckets are powers of two, so each figure is an upper bound.
		fmt.Fprintf(w, "  lateness (Redis TIME at take - due, %d deliveries): p50 < %s, p99 < %s, p99.9 < %s, max < %s\n",
			l.Total(), l.Percentile(50), l.Percentile(99), l.Percentile(99.9), l.Percentile(100))
	} else {
		fmt.Fprintln(w, "  lateness: no deliveries yet")
	}
	return nil
}

func queueDead(ctx context.Context, q *delay.Queue, limit int, w io.Writer) error {
	if limit <= 0 {
		return usagef("-limit %d: want > 0", limit)
	}
	page, err := q.ListDead(ctx, 0, limit)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "queue %s: %d dead letters", q.Name(), page.Total)
	if int64(len(page.Tasks)) < page.Total {
		fmt.Fprintf(w, " (showing %d)", len(page.Tasks))
	}
	fmt.Fprintln(w)
	for _, t := range page.Tasks {
		// IDs, keys and error texts are whatever producers and handlers
		// stored: escaped, so none can move the cursor or forge a line.
		if t.Err != nil {
			fmt.Fprintf(w, "  %s  corrupt record: %s\n", text.Escape(t.ID), text.Escape(t.Err.Error()))
			continue
		}
		fmt.Fprintf(w, "  %s  key %s  attempts %d  died %s  error: %s\n", text.Escape(t.ID), strconv.Quote(t.Key), t.Attempt, t.DiedAt.UTC().Format(time.RFC3339), text.Escape(t.LastError))
	}
	return nil
}

func queueChange(ctx context.Context, q *delay.Queue, sub string, ids []string, yes bool, e *env) error {
	page, err := q.ListDead(ctx, 0, 1)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("all %d dead letters", page.Total)
	if len(ids) > 0 {
		what = fmt.Sprintf("%d dead letter(s) (%s)", len(ids), escapeJoin(ids))
	}
	if len(ids) == 0 && page.Total == 0 {
		fmt.Fprintf(e.stdout, "queue %s: no dead letters, nothing to %s\n", q.Name(), sub)
		return nil
	}
	if !yes {
		if err := confirm(e, fmt.Sprintf("%s %s of queue %s? [y/N] ", sub, what, q.Name())); err != nil {
			return err
		}
	}
	var n int
	switch {
	case sub == "purge" && len(ids) == 0:
		n, err = q.PurgeAll(ctx)
	case sub == "purge":
		n, err = q.Purge(ctx, ids...)
	default:
		if len(ids) == 0 {
			if ids, err = allDeadIDs(ctx, q); err != nil {
				return err
			}
		}
		n, err = requeueAll(ctx, q, ids)
	}
	if err != nil {
		return err
	}
	verb := map[string]string{"requeue": "requeued", "purge": "purged"}[sub]
	fmt.Fprintf(e.stdout, "queue %s: %s %d dead letter(s)\n", q.Name(), verb, n)
	return nil
}

func allDeadIDs(ctx context.Context, q *delay.Queue) ([]string, error) {
	var ids []string
	for off := 0; ; off += 1000 {
		page, err := q.ListDead(ctx, off, 1000)
		if err != nil {
			return nil, err
		}
		for _, t := range page.Tasks {
			ids = append(ids, t.ID)
		}
		if len(page.Tasks) < 1000 {
			return ids, nil
		}
	}
}

func requeueAll(ctx context.Context, q *delay.Queue, ids []string) (int, error) {
	total := 0
	for i := 0; i < len(ids); i += 1000 {
		n, err := q.Requeue(ctx, ids[i:min(i+1000, len(ids))]...)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// confirm asks on stdout and reads one answer from stdin, which must be
// a terminal: a script that forgot -yes is refused rather than answered
// by whatever its stdin holds.
func confirm(e *env, question string) error {
	if f, ok := e.stdin.(*os.File); !ok || !isTerminal(f) {
		return fmt.Errorf("refusing without confirmation: stdin is not a terminal (pass -yes to %s)", strings.Fields(question)[0])
	}
	fmt.Fprint(e.stdout, question)
	line, err := bufio.NewReader(e.stdin).ReadString('\n')
	if err != nil {
		return fmt.Errorf("refusing without confirmation: %v (pass -yes to skip the question)", err)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return fmt.Errorf("not confirmed, nothing changed")
}
