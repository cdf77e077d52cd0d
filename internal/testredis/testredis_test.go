package testredis

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const envChild = "TESTREDIS_CHILD"

// TestFallbackServerDiesWithItsBinary: with TIERSET_REDIS_URL unset, a test
// binary's URL starts a private redis-server, and when that binary is
// SIGKILLed (no cleanup of its own runs) the server goes with it.
func TestFallbackServerDiesWithItsBinary(t *testing.T) {
	if !HaveServer() {
		t.Skip("redis-server not on PATH: no fallback server to check")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFallbackChild$", "-test.v")
	cmd.Env = append(filterEnv(os.Environ(), EnvURL, EnvNoServer), envChild+"=1")
	out := StartChildPipe(t, cmd, cmd.StdoutPipe)
	var url string
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "URL="); ok {
				lines <- u
			}
		}
		close(lines)
	}()
	select {
	case url = <-lines:
	case <-time.After(20 * time.Second):
		t.Fatal("the child printed no URL")
	}
	if url == "" {
		t.Fatal("the child found no fallback server")
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: opt.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("the child's server does not answer: %v", err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(ctx).Err() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the server at %s still answers 10 s after its test binary was killed", opt.Addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFallbackChild is the child of TestFallbackServerDiesWithItsBinary;
// it does nothing unless started by it.
func TestFallbackChild(t *testing.T) {
	if os.Getenv(envChild) != "1" {
		t.Skip("child process of TestFallbackServerDiesWithItsBinary only")
	}
	os.Stdout.WriteString("URL=" + URL() + "\n")
	select {} // until killed
}

// TestRedisUsesFallback: with no TIERSET_REDIS_URL, Redis and EachReal run
// on the fallback server when redis-server is on PATH.
func TestRedisUsesFallback(t *testing.T) {
	if os.Getenv(EnvURL) != "" {
		t.Skipf("%s is set: the fallback is not used", EnvURL)
	}
	if !HaveServer() {
		t.Skip("redis-server not on PATH: no fallback")
	}
	if os.Getenv(EnvNoServer) == "1" {
		t.Skipf("%s=1", EnvNoServer)
	}
	ran := false
	EachReal(t, func(t *testing.T, b *Backend) {
		if b.Name != NameRedis && b.Name != NameCluster {
			t.Fatalf("backend %s", b.Name)
		}
		if err := b.Client.Set(context.Background(), b.Prefix+":k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		ran = true
	})
	if !ran {
		t.Fatal("EachReal ran nothing")
	}
}

func filterEnv(env []string, drop ...string) []string {
	var out []string
	for _, kv := range env {
		keep := true
		for _, d := range drop {
			if strings.HasPrefix(kv, d+"=") {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}
