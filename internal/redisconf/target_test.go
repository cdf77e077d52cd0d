package redisconf_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/tierset/tierset/internal/redisconf"
	"github.com/tierset/tierset/internal/testredis"
)

func TestParse(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in     string
		addr   string
		seeds  int
		tls    bool
		errHas string
	}{
		{in: "127.0.0.1:6600", addr: "127.0.0.1:6600"},
		{in: "localhost:6600", addr: "localhost:6600"},
		{in: "localhost", addr: "localhost:6379"},
		{in: "[::1]:7000", addr: "[::1]:7000"},
		{in: "::1", addr: "[::1]:6379"},
		{in: "redis://127.0.0.1:6379/2", addr: "127.0.0.1:6379"},
		{in: "rediss://:pw@cache.example:6380/0", addr: "cache.example:6380", tls: true},
		{in: "127.0.0.1:7000,127.0.0.1:7001", addr: "127.0.0.1:7000", seeds: 2},
		{in: "127.0.0.1:7000,", addr: "127.0.0.1:7000", seeds: 1},
		{in: "rediss://:pw@h1:7000,rediss://:pw@h2:7001", addr: "h1:7000", seeds: 2, tls: true},
		{in: "", errHas: "empty"},
		{in: "host:port", errHas: "port"},
		{in: "host:0", errHas: "port"},
		{in: "http://host:6379", errHas: "scheme"},
		{in: ":s3cr3t@host:6379", errHas: "xxxxx"},
		{in: "redis://h1:1,rediss://h2:2", errHas: "TLS"},
		{in: "redis://h1:1/3,redis://h2:2", errHas: "database 0"},
		{in: ",", errHas: "no cluster seed"},
	}
	for _, c := range cases {
		got, err := redisconf.Parse(c.in)
		if c.errHas != "" {
			if err == nil || !strings.Contains(err.Error(), c.errHas) || strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("Parse(%q) = %v, want an error with %q and no password", c.in, err, c.errHas)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if got.Addr() != c.addr || len(got.Seeds) != c.seeds || (got.TLS != nil) != c.tls {
			t.Errorf("Parse(%q) = addr %s, %d seeds, TLS %v; want %s, %d, %v", c.in, got.Addr(), len(got.Seeds), got.TLS != nil, c.addr, c.seeds, c.tls)
		}
		if got.Single != nil && !got.Single.ContextTimeoutEnabled {
			t.Errorf("Parse(%q): ContextTimeoutEnabled is off", c.in)
		}
	}
}

// TestProbe: a closed port is named as refused, and TLS against a plain
// Redis is named as a TLS failure, each well within the timeout.
func TestProbe(t *testing.T) {
	t.Parallel()
	closed := testredis.ClosedAddr(t)
	tgt, err := redisconf.Parse(closed)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = redisconf.Probe(context.Background(), tgt, 2*time.Second)
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("closed port: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("closed port took %v", d)
	}

	srv := miniredis.RunT(t)
	tgt, err = redisconf.Parse("rediss://" + srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	err = redisconf.Probe(context.Background(), tgt, 2*time.Second)
	if err == nil || !strings.Contains(err.Error(), "TLS handshake") {
		t.Errorf("rediss:// to a plain server: %v", err)
	}
	if d := time.Since(start); d > 2500*time.Millisecond {
		t.Errorf("TLS failure took %v", d)
	}
}
