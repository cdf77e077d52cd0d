package measure

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// ByteCounter counts the bytes a client reads from its connections: wire
// it in as the Dialer of redis.Options or redis.ClusterOptions. What a
// command reads back is the same RESP on every server for the same data,
// so a per-lookup figure is a backend-independent measure of how much an
// access pattern moves.
type ByteCounter struct {
	read atomic.Int64
}

// Read returns the bytes read so far.
func (b *ByteCounter) Read() int64 { return b.read.Load() }

// Dialer dials with a net.Dialer and counts what every connection reads.
func (b *ByteCounter) Dialer(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, n: &b.read}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// ClientLike returns a new client with c's options and, when dialer is
// not nil, that dialer: a client of its own, so a counting hook or dialer
// sees only the calls being measured. The copy gets its own push
// notification processor (c's is registered to c already, and go-redis
// logs a refused handler when two clients share one). The caller closes it.
func ClientLike(c redis.UniversalClient, dialer func(ctx context.Context, network, addr string) (net.Conn, error)) (redis.UniversalClient, error) {
	switch cc := c.(type) {
	case *redis.Client:
		o := *cc.Options()
		o.PushNotificationProcessor = nil
		if dialer != nil {
			o.Dialer = dialer
		}
		return redis.NewClient(&o), nil
	case *redis.ClusterClient:
		o := *cc.Options()
		o.PushNotificationProcessor = nil
		if dialer != nil {
			o.Dialer = dialer
		}
		return redis.NewClusterClient(&o), nil
	}
	return nil, fmt.Errorf("measure: cannot copy a client of type %T", c)
}
