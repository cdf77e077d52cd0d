package faultproxy_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/testredis"
)

// waitHeld waits, up to 5 s, until h holds a reply.
func waitHeld(t *testing.T, h *faultproxy.Hold) {
	t.Helper()
	select {
	case <-h.Held():
	case <-time.After(5 * time.Second):
		t.Fatal("no reply held in 5 s")
	}
}

// TestFaultProxyHoldsOneReply: the held command ran on the server, its
// caller waits until Release and then gets the reply; other connections
// are not held, and the next command on the held connection goes through.
func TestFaultProxyHoldsOneReply(t *testing.T) {
	f := testredis.StartFaulty(t)
	p, c := f.Proxy, f.Cut
	direct := f.Server.Client(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	h := p.HoldNext(faultproxy.Contains("INCR"))
	type reply struct {
		v   int64
		err error
	}
	done := make(chan reply, 1)
	go func() {
		v, err := c.Incr(ctx, "n").Result()
		done <- reply{v, err}
	}()
	waitHeld(t, h)
	if got := direct.Get(ctx, "n").Val(); got != "1" {
		t.Fatalf("the held command did not run on the server: n=%q, want 1", got)
	}
	// Another connection of the same client is not held.
	if err := c.Set(ctx, "m", "x", 0).Err(); err != nil {
		t.Fatalf("SET beside a held reply: %v", err)
	}
	select {
	case r := <-done:
		t.Fatalf("the held INCR returned before Release: %v %v", r.v, r.err)
	default:
	}
	h.Release()
	if r := <-done; r.err != nil || r.v != 1 {
		t.Fatalf("released INCR: %v %v, want 1", r.v, r.err)
	}
	h.Release() // a second Release is harmless
	if v, err := c.Incr(ctx, "n").Result(); err != nil || v != 2 {
		t.Fatalf("after the release: %v %v, want 2", v, err)
	}
}

// TestFaultProxyHoldsAPush: a message the server pushes unasked (here a
// pub/sub message) is held by its content until Release; Close frees a
// reply still held.
func TestFaultProxyHoldsAPush(t *testing.T) {
	f := testredis.StartFaulty(t)
	p, c := f.Proxy, f.Cut
	direct := f.Server.Client(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	ps := c.Subscribe(ctx, "ch")
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(ctx); err != nil { // the subscribe confirmation
		t.Fatal(err)
	}
	h := p.HoldNextReply(faultproxy.Contains("first"))
	if err := direct.Publish(ctx, "ch", "first").Err(); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, h)
	got := make(chan string, 2)
	go func() {
		for {
			m, err := ps.ReceiveMessage(ctx)
			if err != nil {
				return
			}
			got <- m.Payload
		}
	}()
	if err := direct.Publish(ctx, "ch", "second").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		t.Fatalf("%q delivered while the first message was held", m)
	default:
	}
	h.Release()
	for _, want := range []string{"first", "second"} {
		select {
		case m := <-got:
			if m != want {
				t.Fatalf("got %q, want %q (order kept behind the hold)", m, want)
			}
		case <-ctx.Done():
			t.Fatalf("%q not delivered after Release", want)
		}
	}

	// A hold never released ends with the proxy.
	h2 := p.HoldNext(faultproxy.Contains("PING"))
	errc := make(chan error, 1)
	pc := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = pc.Close() })
	go func() { errc <- pc.Ping(ctx).Err() }()
	waitHeld(t, h2)
	_ = p.Close()
	if err := <-errc; err == nil {
		t.Fatal("PING held through Close: want a connection error")
	}
}
