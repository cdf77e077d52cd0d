package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/keyname"
	"github.com/tierset/tierset/internal/opsview"
	"github.com/tierset/tierset/internal/text"
	"github.com/tierset/tierset/periodic"
)

const periodicSynopsis = "tierset periodic list|pause|resume|forget [-queue NAME] [-job NAME] -redis URL [-prefix P] [-json]"

// periodicCmd is tierset periodic: its subcommands, in the order help
// lists them, each with the flags it reads besides -redis and -prefix.
var periodicCmd = command{name: "periodic", common: []string{"redis", "prefix"}, flags: periodicFlags, subs: []subcommand{
	{"list", []string{"queue", "json"}}, {"pause", []string{"queue", "job"}}, {"resume", []string{"queue", "job"}}, {"forget", []string{"queue", "job"}},
}}

func periodicFlags() *cmdFlags {
	fs := newFlags("periodic", periodicSynopsis)
	fs.String("queue", "", "the queue `NAME` the jobs run on; list: default every queue; required otherwise")
	fs.String("job", "", "pause/resume/forget: the periodic job's `NAME`")
	fs.String("redis", "", "Redis: host:port, a redis:// or rediss:// `URL`, or comma-separated cluster seeds (default $TIERSET_REDIS_URL); required")
	fs.String("prefix", delay.DefaultPrefix, "the queues' key `prefix`")
	fs.Bool("json", false, "list: one JSON array of every job, for scripts")
	return fs
}

// cmdPeriodic lists, pauses, resumes and forgets the periodic jobs of
// queues (package periodic): every flag is checked before Redis is
// reached.
func cmdPeriodic(ctx context.Context, args []string, e *env) error {
	sub, fs, err := periodicCmd.parse(args, e)
	if err != nil {
		return err
	}
	str := func(name string) string { return fs.Lookup(name).Value.String() }
	qname, job, prefix, asJSON := str("queue"), str("job"), str("prefix"), str("json") == "true"
	if qname != "" {
		if err := keyname.Check(qname); err != nil {
			return usagef("-queue %s: invalid queue name: %v", quoteArg(qname), err)
		}
	}
	if sub != "list" {
		switch {
		case qname == "":
			return usagef("%s needs -queue", sub)
		case job == "":
			return usagef("%s needs -job (the periodic job's name, as list shows it)", sub)
		}
		if err := keyname.Check(job); err != nil || len(job) > periodic.MaxNameBytes {
			if err == nil {
				err = fmt.Errorf("%d bytes (max %d)", len(job), periodic.MaxNameBytes)
			}
			return usagef("-job %s: invalid job name: %v", quoteArg(job), err)
		}
	}
	redisURL := str("redis")
	if !redisGiven(redisURL) {
		return usagef("-redis (or $TIERSET_REDIS_URL) is required: periodic jobs live in a real Redis")
	}
	be, err := connect(ctx, redisURL, e)
	if err != nil {
		return err
	}
	defer be.close()
	names := []string{qname}
	if qname == "" {
		if names, err = periodic.Discover(ctx, be.client, prefix); err != nil {
			return err
		}
	}
	qs := make([]*delay.Queue, len(names))
	for i, n := range names {
		if qs[i], err = delay.New(be.client, n, delay.Options{Prefix: prefix}); err != nil {
			return usagef("%v", err)
		}
	}
	if sub == "list" {
		return periodicList(ctx, qs, asJSON, e.stdout)
	}
	return periodicChange(ctx, qs[0], prefix, sub, job, e.stdout)
}

// periodicRow is one job of List, with its queue.
type periodicRow struct {
	Queue string
	periodic.JobInfo
}

// periodicList prints every job of qs: a table, then each job's live
// processes; or one JSON array.
func periodicList(ctx context.Context, qs []*delay.Queue, asJSON bool, w io.Writer) error {
	var rows []periodicRow
	for _, q := range qs {
		jobs, err := periodic.List(ctx, q)
		if err != nil {
			return fmt.Errorf("queue %s: %w", text.Escape(q.Name()), err)
		}
		for _, j := range jobs {
			rows = append(rows, periodicRow{Queue: q.Name(), JobInfo: j})
		}
	}
	if asJSON {
		views := make([]opsview.PeriodicJob, len(rows))
		for i, r := range rows {
			views[i] = opsview.PeriodicJobOf(r.Queue, r.JobInfo)
		}
		return output{w: w, json: true}.encode(views)
	}
	if len(rows) == 0 {
		fmt.Fprintf(w, "no periodic job on %s\n", count(len(qs), "queue", "queues"))
		return nil
	}
	utc := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tJOB\tSPEC\tCATCH-UP\tSTATE\tLAST TICK\tLAST ENQUEUED\tNEXT TICK\tPROCESSES\t")
	for _, r := range rows {
		procs := 0
		for _, d := range r.Definitions {
			procs += len(d.Processes)
		}
		spec := r.Spec
		if spec == "" {
			spec = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", text.Escape(r.Queue), text.Escape(r.Name), text.Escape(spec),
			r.CatchUp, opsview.JobState(r.JobInfo), utc(r.Last), utc(r.LastEnqueued), utc(r.Next), procs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		for _, d := range r.Definitions {
			role := "winner"
			if !d.Winner {
				role = "waiting"
			}
			for _, p := range d.Processes {
				fmt.Fprintf(w, "  %s/%s: %s declared %s (definition %s, %s: %s)\n", text.Escape(r.Queue), text.Escape(r.Name),
					text.Escape(p.Process), utc(p.Declared), d.Digest, role, text.Escape(d.Spec))
			}
		}
	}
	fmt.Fprintf(w, "%s\n", count(len(rows), "periodic job", "periodic jobs"))
	return nil
}

// periodicChange pauses, resumes or forgets one job.
func periodicChange(ctx context.Context, q *delay.Queue, prefix, sub, job string, w io.Writer) error {
	var err error
	switch sub {
	case "pause":
		err = periodic.Pause(ctx, q, job)
	case "resume":
		err = periodic.Resume(ctx, q, job)
	case "forget":
		err = periodic.Forget(ctx, q, job)
	}
	name := text.Escape(q.Name()) + "/" + text.Escape(job)
	switch {
	case errors.Is(err, periodic.ErrNotFound):
		return fmt.Errorf("no periodic job %s on queue %s under prefix %s (list shows the jobs)", quoteArg(job), quoteArg(q.Name()), quoteArg(prefix))
	case errors.Is(err, periodic.ErrDeclared):
		return fmt.Errorf("%w; stop it (or Scheduler.Remove) in every process first", err)
	case err != nil:
		return err
	}
	switch sub {
	case "pause":
		fmt.Fprintf(w, "periodic job %s: paused in every process; its ticks pass without tasks until resumed\n", name)
	case "resume":
		fmt.Fprintf(w, "periodic job %s: resumed; its next tick makes a task\n", name)
	case "forget":
		fmt.Fprintf(w, "periodic job %s: forgotten\n", name)
	}
	return nil
}
