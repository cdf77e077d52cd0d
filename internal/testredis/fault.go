package testredis

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/faultproxy"
)

// Ctx is a test's context: it ends 2 minutes after the call or when the
// test's cleanup runs, so no test hangs on a server that stopped
// answering. It is not t.Context, which ends before the cleanups that
// still talk to Redis.
func Ctx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Faulty is what every fault test stands on: a private redis-server (with
// serverArgs) and a fault proxy in front of it, and Cut, a client through
// the proxy on go-redis's default options but ContextTimeoutEnabled
// (MaxRetries 3: a command whose reply was cut is sent again), the
// setting the fault model is about. Everything stops at cleanup; the test
// skips, saying why, without redis-server on PATH.
type Faulty struct {
	Server *Server
	Proxy  *faultproxy.Proxy
	Cut    *redis.Client
}

// StartFaulty starts a Faulty.
func StartFaulty(t *testing.T, serverArgs ...string) *Faulty {
	t.Helper()
	srv := StartServer(t, serverArgs...)
	p, err := faultproxy.Start(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	cut := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = cut.Close() })
	return &Faulty{Server: srv, Proxy: p, Cut: cut}
}
