package console

import (
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/keyname"
)

// benchURLEnv names the private, empty Redis BenchmarkConsole1M fills
// (scripts/console-bench.sh starts one): the benchmark writes 1M tasks.
const benchURLEnv = "TIERSET_CONSOLE_BENCH_URL"

// BenchmarkConsole1M times each console page on a queue of 1M tasks
// (900k pending: 850k due, 50k scheduled; 50k in flight; 50k dead) beside
// 10k promotions, on the Redis named by $TIERSET_CONSOLE_BENCH_URL.
func BenchmarkConsole1M(b *testing.B) {
	u := os.Getenv(benchURLEnv)
	if u == "" {
		b.Skipf("$%s unset: this benchmark fills a private Redis with 1M tasks (run scripts/console-bench.sh)", benchURLEnv)
	}
	opt, err := redis.ParseURL(u)
	if err != nil {
		b.Fatal(err)
	}
	opt.ContextTimeoutEnabled = true
	client := redis.NewClient(opt)
	b.Cleanup(func() { _ = client.Close() })
	ctx := b.Context()
	const prefix = "cb"
	q, err := delay.New(client, "bench", delay.Options{Prefix: prefix, Lease: 24 * time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	st, err := q.Stats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if st.Pending+st.InFlight+st.Dead != 1_000_000 {
		fill1M(b, client, q)
	}
	if st, err = q.Stats(ctx); err != nil || st.Pending != 900_000 || st.InFlight != 50_000 || st.Dead != 50_000 {
		b.Fatalf("seeded Stats %+v, %v", st, err)
	}
	srv, err := New(ctx, Options{Client: client, Redis: "bench", Token: "t", Loopback: true, QueuePrefix: prefix, CachePrefix: prefix})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	b.Cleanup(hs.Close)
	deep, err := client.ZRangeWithScores(ctx, prefix+":"+keyname.QueueTag("bench")+":due", 800_000, 800_000).Result()
	if err != nil || len(deep) != 1 {
		b.Fatalf("deep cursor: %v, %v", deep, err)
	}
	cursor := strconv.FormatFloat(deep[0].Score, 'f', -1, 64) + ":" + deep[0].Member.(string)
	dead, err := q.List(ctx, delay.ListOptions{State: delay.StateDead, Limit: 50})
	if err != nil {
		b.Fatal(err)
	}
	confirm := "/confirm?queue=bench&action=requeue"
	for _, e := range dead.Tasks {
		confirm += "&id=" + e.ID
	}
	if n, err := client.DBSize(ctx).Result(); err == nil {
		b.Logf("keys in the database: %d", n)
	}
	for _, p := range []struct{ name, path string }{
		{"queues", "/queues"},
		{"queue", "/queue?name=bench"},
		{"tasks-due-first", "/tasks?queue=bench&state=due"},
		{"tasks-due-at-800k", "/tasks?queue=bench&state=due&cursor=" + url.QueryEscape(cursor)},
		{"tasks-due-newest", "/tasks?queue=bench&state=due&order=newest"},
		{"tasks-scheduled", "/tasks?queue=bench&state=scheduled"},
		{"tasks-inflight", "/tasks?queue=bench&state=inflight"},
		{"tasks-dead", "/tasks?queue=bench&state=dead"},
		{"tasks-key-prefix-hit", "/tasks?queue=bench&state=due&key=order-01"},
		{"tasks-key-prefix-miss-10k-window", "/tasks?queue=bench&state=due&key=nomatch"},
		{"tasks-error-miss-10k-window", "/tasks?queue=bench&state=dead&err=nomatch"},
		{"task", "/task?queue=bench&id=" + dead.Tasks[0].ID},
		{"confirm-50", confirm},
		{"workers", "/workers"},
		{"dead-legacy", "/dead?queue=bench"},
		{"promotions", "/promotions"},
		{"promotion-simulate", "/promotion?id=promo-04242&value=9"},
	} {
		b.Run(p.name, func(b *testing.B) { benchGet(b, hs.URL+p.path, 500) })
	}
}

// fill1M writes the benchmark's tasks and promotions into an empty Redis.
func fill1M(b *testing.B, client redis.UniversalClient, q *delay.Queue) {
	ctx := b.Context()
	if n, err := client.DBSize(ctx).Result(); err != nil || n != 0 {
		b.Fatalf("$%s must name an empty Redis: %d keys, %v", benchURLEnv, n, err)
	}
	start := time.Now()
	past := time.Now().Add(-2 * time.Hour)
	enqueueBench(b, ctx, q, 1_000_000, func(i int) delay.Job {
		w := delay.At(past.Add(time.Duration(i) * 5 * time.Millisecond)) // due: 0 to 79 min ago
		if i >= 950_000 {
			w = delay.After(time.Hour + time.Duration(i)*time.Millisecond) // the last 50k scheduled
		}
		return delay.Job{Key: fmt.Sprintf("order-%07d", i), Payload: []byte(`{"order":42,"sku":"tote"}`), When: w}
	})
	killHalves(b, ctx, q, 100) // 100k taken: half killed, half left in flight
	c, err := cache.New(client, cache.Options{Prefix: "cb"})
	if err != nil {
		b.Fatal(err)
	}
	promos := benchPromotions(10_000)
	for i := 0; i < len(promos); i += 500 {
		if _, err := c.Refresh(ctx, promos[i:i+500]...); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("filled 1M tasks and 10k promotions in %v", time.Since(start).Round(time.Second))
}
