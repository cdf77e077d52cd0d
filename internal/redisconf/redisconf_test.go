package redisconf_test

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/redisconf"
)

func TestCheckDeadlines(t *testing.T) {
	cases := []struct {
		name   string
		client any
		refuse bool
	}{
		{"client without", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), true},
		{"client with", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}), false},
		{"cluster without", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}), true},
		{"cluster with", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ContextTimeoutEnabled: true}), false},
		{"ring without", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}}), true},
		{"ring with", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, ContextTimeoutEnabled: true}), false},
		{"failover client without", redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}}), true},
		{"unknown type", struct{}{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if cl, ok := c.client.(interface{ Close() error }); ok {
				t.Cleanup(func() { _ = cl.Close() })
			}
			err := redisconf.CheckDeadlines(c.client)
			if (err != nil) != c.refuse {
				t.Fatalf("err = %v, refuse %v", err, c.refuse)
			}
			if err != nil && !strings.Contains(err.Error(), "ContextTimeoutEnabled") {
				t.Errorf("error does not name the option: %v", err)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"redis://:s3cr3t@host:6379/0", "redis://:xxxxx@host:6379/0"},
		{"rediss://alice:s3cr3t@host:6380/1", "rediss://alice:xxxxx@host:6380/1"},
		{"redis://s3cr3t@host/0", "redis://xxxxx@host/0"},
		{"redis://:p%40ss@host/0", "redis://:xxxxx@host/0"},
		{"redis://host:6379/0", "redis://host:6379/0"},
		{"127.0.0.1:7000,127.0.0.1:7001", "127.0.0.1:7000,127.0.0.1:7001"},
		{"redis://:s3cr3t@host:badport/0", "redis://:xxxxx@host:badport/0"},
		{"redis://:s3cr3t@host/0?password=s3cr3t&dial_timeout=1s", "redis://:xxxxx@host/0?dial_timeout=1s&password=xxxxx"},
		{"redis://:s3%zzcr3t@host/0", "redis://:xxxxx@host/0"},
		{"redis://:s3cr3t@h1:1,redis://:s3cr3t@h2:2", "redis://:xxxxx@h1:1,redis://:xxxxx@h2:2"},
		{":s3cr3t@host", ":xxxxx@host"},
		{"redis://:s3,cr3t@host/0", "redis://:xxxxx@host/0"},
		{"redis://:s3cr3t@h1:1,h2:2", "redis://:xxxxx@h1:1,h2:2"},
	}
	for _, c := range cases {
		got := redisconf.Redact(c.in)
		if got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
		for _, s := range redisconf.Secrets(c.in) {
			if strings.Contains(got, s) {
				t.Errorf("Redact(%q) = %q still holds %q", c.in, got, s)
			}
		}
	}
	if got := redisconf.Secrets("redis://:p%40ss@host/0"); len(got) != 2 || got[0] != "p%40ss" || got[1] != "p@ss" {
		t.Errorf("Secrets = %q, want raw and decoded", got)
	}
}
