package testredis

import (
	"net"
	"testing"
)

// ClosedAddr returns a loopback host:port nothing listens on: a port the
// kernel handed out and the test closed again, so a dial there is refused.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
