package periodic_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/testredis"
	"github.com/tierset/tierset/periodic"
)

// Discover finds a queue by its periodic jobs before its first task,
// and not a queue with tasks but no jobs; a bad prefix or a nil client is
// a typed error.
func TestDiscover(t *testing.T) {
	t.Parallel()
	testredis.EachCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		jobs, err := delay.New(b.Client, "cron", delay.Options{Prefix: b.Prefix})
		if err != nil {
			t.Fatal(err)
		}
		plain, err := delay.New(b.Client, "orders", delay.Options{Prefix: b.Prefix})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := plain.Enqueue(ctx, delay.Job{Key: "o", When: delay.After(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		s, err := periodic.New(jobs, periodic.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Add(periodic.Job{Name: "hourly", Schedule: periodic.Every(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- s.Run(rctx) }()
		t.Cleanup(func() { cancel(); <-done })
		deadline := time.Now().Add(10 * time.Second)
		for {
			names, err := periodic.Discover(ctx, b.Client, b.Prefix)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Equal(names, []string{"cron"}) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Discover: %v, want [cron] within 10 s of the declaration", names)
			}
			time.Sleep(10 * time.Millisecond)
		}
		// Discover sends nothing through delay, so a client that ignores
		// ctx deadlines on the socket lists the same.
		if c, ok := b.Client.(*redis.Client); ok {
			opt := *c.Options()
			opt.ContextTimeoutEnabled = false
			plainClient := redis.NewClient(&opt)
			t.Cleanup(func() { plainClient.Close() })
			names, err := periodic.Discover(ctx, plainClient, b.Prefix)
			if err != nil || !slices.Equal(names, []string{"cron"}) {
				t.Errorf("Discover with ContextTimeoutEnabled false: %v, %v, want [cron]", names, err)
			}
		}
		if _, err := periodic.Discover(ctx, b.Client, "bad prefix"); !errors.Is(err, delay.ErrInvalid) {
			t.Errorf("Discover with a bad prefix: %v, want ErrInvalid", err)
		}
		if _, err := periodic.Discover(ctx, nil, ""); !errors.Is(err, delay.ErrInvalid) {
			t.Errorf("Discover with a nil client: %v, want ErrInvalid", err)
		}
	})
}
