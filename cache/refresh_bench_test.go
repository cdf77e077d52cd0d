package cache

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/measure"
	"github.com/tierset/tierset/internal/testredis"
)

// countConn counts the bytes a client writes to and reads from Redis.
type countConn struct {
	net.Conn
	out, in *atomic.Int64
}

func (c countConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.out.Add(int64(n))
	return n, err
}

func (c countConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.Add(int64(n))
	return n, err
}

// cpuTime is this process's CPU time so far; a benchmark that reports it
// is skipped where the platform cannot tell.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	d, ok := measure.ProcessCPU()
	if !ok {
		b.Skip("the process's CPU time needs getrusage (unix)")
	}
	return d
}

// BenchmarkRefreshUnchanged is the cost of a refresh that finds the
// stored promotion current and whole: the steady state of a re-warm. It
// reports the wire bytes each refresh sends and receives, counted on the
// client's connections, and the client process's CPU time per refresh. Real Redis only (TIERSET_REDIS_URL).
func BenchmarkRefreshUnchanged(b *testing.B) {
	url := testredis.URL()
	if url == "" {
		b.Skip("wire bytes are measured against a real server: " + testredis.NoRealWhy())
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		b.Fatal(err)
	}
	var out, in atomic.Int64
	opt.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countConn{Conn: c, out: &out, in: &in}, nil
	}
	client := redis.NewClient(opt)
	b.Cleanup(func() { _ = client.Close() })
	// testredis.Redis cleans the prefix at the end; the counting client
	// shares it.
	be := *testredis.Redis(b)
	be.Client = client
	for _, tiers := range []int{10, 300} {
		b.Run(fmt.Sprintf("tiers=%d", tiers), func(b *testing.B) {
			ctx := context.Background()
			c := newCache(b, &be, Options{})
			p := simplePromotion(fmt.Sprintf("unch%d", tiers), seq(tiers)...)
			if _, err := c.Refresh(ctx, p); err != nil {
				b.Fatal(err)
			}
			if rep, err := c.Refresh(ctx, p); err != nil || rep.Unchanged != 1 {
				b.Fatalf("second refresh: %+v %v", rep, err)
			}
			b.ReportAllocs()
			cpu0 := cpuTime(b)
			o0, i0 := out.Load(), in.Load()
			n := 0
			for b.Loop() {
				if _, err := c.Refresh(ctx, p); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(time.Microsecond)/float64(n), "cpu-µs/op")
			b.ReportMetric(float64(out.Load()-o0)/float64(n), "B-sent/op")
			b.ReportMetric(float64(in.Load()-i0)/float64(n), "B-recv/op")
		})
	}
}
