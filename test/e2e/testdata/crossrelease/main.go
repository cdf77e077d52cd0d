// Command crossrelease is the previous release's side of
// TestCrossReleaseRollingDeploy: the test copies it into a tree of the
// previous tagged release (git archive) and builds it there, so it must
// compile against that release's API (v0.1.0), not this tree's.
//
//	crossrelease work  -redis URL -prefix P -queue Q -id ID -done LIST
//	crossrelease enqueue -redis URL -prefix P -queue Q -from I -n N
//	crossrelease warm  -redis URL -prefix P -rules FILE [-prune]
//
// work runs a worker until SIGTERM; its handler RPUSHes "old <key>" to the
// list LIST, so the test counts every run of every task. warm prints the
// warm.Summary as JSON on stdout.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/rules"
	"github.com/tierset/tierset/warm"
)

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: crossrelease work|enqueue|warm [flags]"))
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	url := fs.String("redis", "", "Redis URL")
	prefix := fs.String("prefix", "", "key prefix")
	queue := fs.String("queue", "q", "queue name")
	id := fs.String("id", "", "the worker's pool ID")
	done := fs.String("done", "", "list each handled task's key is pushed to")
	from := fs.Int("from", 0, "first task number")
	n := fs.Int("n", 0, "tasks to enqueue")
	file := fs.String("rules", "", "rules file")
	prune := fs.Bool("prune", false, "prune promotions absent from the file")
	if err := fs.Parse(os.Args[2:]); err != nil {
		fail(err)
	}
	opt, err := redis.ParseURL(*url)
	if err != nil {
		fail(err)
	}
	opt.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	switch os.Args[1] {
	case "work":
		q, err := delay.New(rdb, *queue, delay.Options{Prefix: *prefix})
		if err != nil {
			fail(err)
		}
		p, err := delay.NewPool(delay.PoolOptions{Concurrency: 4, ID: *id, Heartbeat: 100 * time.Millisecond})
		if err != nil {
			fail(err)
		}
		err = p.Add(q, func(ctx context.Context, t *delay.Task) error {
			time.Sleep(2 * time.Millisecond) // a handler that takes a little time, so tasks spread over both releases
			return rdb.RPush(ctx, *done, "old "+t.Key).Err()
		}, delay.QueueOptions{})
		if err != nil {
			fail(err)
		}
		if err := p.Run(ctx); err != nil && ctx.Err() == nil {
			fail(err)
		}
	case "enqueue":
		q, err := delay.New(rdb, *queue, delay.Options{Prefix: *prefix})
		if err != nil {
			fail(err)
		}
		for i := *from; i < *from+*n; i++ {
			if _, err := q.Enqueue(ctx, delay.Job{Key: fmt.Sprintf("k%d", i)}); err != nil {
				fail(err)
			}
		}
	case "warm":
		c, err := cache.New(rdb, cache.Options{Prefix: *prefix})
		if err != nil {
			fail(err)
		}
		promos, err := rules.ParseFile(*file, rules.Options{})
		if err != nil {
			fail(err)
		}
		sum, err := warm.Warm(ctx, c, promos, warm.Options{Prune: *prune})
		if err != nil {
			fail(err)
		}
		if err := json.NewEncoder(os.Stdout).Encode(sum); err != nil {
			fail(err)
		}
	default:
		fail(fmt.Errorf("unknown command %q", os.Args[1]))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "crossrelease:", err)
	os.Exit(1)
}
