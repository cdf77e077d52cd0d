package cache

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// countingLoader serves promotions from a map, counting calls, after an
// optional delay (which widens the stampede window).
type countingLoader struct {
	mu     sync.Mutex
	promos map[string]gradient.Promotion
	delay  time.Duration
	calls  atomic.Int64
}

func (l *countingLoader) Load(ctx context.Context, id string) (*gradient.Promotion, error) {
	l.calls.Add(1)
	if l.delay > 0 {
		select {
		case <-time.After(l.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	l.mu.Lock()
	p, ok := l.promos[id]
	l.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("source: %q: %w", id, ErrUnknownPromotion)
	}
	return &p, nil
}

// checkCold checks one read of the cold promotion against the oracle.
func checkCold(m *gradient.Matcher, s int64, r Result) string {
	want, werr := m.MatchScore(s)
	switch {
	case werr != nil && !errors.Is(r.Err, ErrNoTier):
		return fmt.Sprintf("score %d: want no tier, got %v", s, r.Err)
	case werr == nil && (r.Err != nil || r.Tier == nil || r.Tier.ID != want.Tier.ID || len(r.Tier.Gifts) != len(want.Tier.Gifts)):
		return fmt.Sprintf("score %d: want %s, got %+v %v", s, want.Tier.ID, r.Tier, r.Err)
	case want.Next != nil && (r.Next == nil || r.Next.ID != want.Next.ID):
		return fmt.Sprintf("score %d: next %+v, want %s", s, r.Next, want.Next.ID)
	}
	return ""
}

// stampede runs n goroutines that each match the cold promotion once and
// returns the lines that disagreed with the oracle.
func stampede(ctx context.Context, c *Cache, m *gradient.Matcher, n int) (bad []string) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := int64(g % 12)
			rs, err := c.MatchCart(ctx, []Query{QuantityQuery("cold", s)}, MatchOptions{Next: true, Gifts: true})
			msg := ""
			if err != nil {
				msg = err.Error()
			} else {
				msg = checkCold(m, s, rs[0])
			}
			if msg != "" {
				mu.Lock()
				bad = append(bad, msg)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return bad
}

func coldPromotion() gradient.Promotion { return simplePromotion("cold", 2, 4, 8) }

// TestReadThroughOneLoadPerProcess: 200 goroutines on a cold promotion,
// never stored or stored and then damaged (its tiers key deleted), with
// and without a near cache, make one Load, and every line gets the
// oracle's answer.
func TestReadThroughOneLoadPerProcess(t *testing.T) {
	t.Parallel()
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
		for _, tc := range []struct{ near, damaged bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
			near := tc.near
			if near && !b.Real() {
				continue // miniredis has no client tracking: the near cache would never engage
			}
			t.Run(fmt.Sprintf("near=%v,damaged=%v", near, tc.damaged), func(t *testing.T) {
				ctx := testCtx(t)
				p := coldPromotion()
				m, _ := gradient.NewMatcher(p)
				ld := &countingLoader{promos: map[string]gradient.Promotion{"cold": p}, delay: 50 * time.Millisecond}
				prefix := testredis.Prefix(t)
				opts := Options{Prefix: prefix, Loader: ld}
				var c *Cache
				if near {
					c = newNearCache(t, nearClient(t, b), prefix, opts)
				} else {
					var err error
					if c, err = New(b.Client, opts); err != nil {
						t.Fatal(err)
					}
				}
				t.Cleanup(func() { cleanupPrefix(t, b, prefix) })
				if tc.damaged {
					if _, err := c.Refresh(ctx, p); err != nil {
						t.Fatal(err)
					}
					if err := b.Client.Del(ctx, c.tiersKey(p.ID)).Err(); err != nil {
						t.Fatal(err)
					}
				}
				if bad := stampede(ctx, c, m, 200); len(bad) > 0 {
					t.Fatalf("%d bad lines, first: %s", len(bad), bad[0])
				}
				if n := ld.calls.Load(); n != 1 {
					t.Fatalf("%d loads, want 1", n)
				}
			})
		}
	})
}

// cleanupPrefix deletes a sub-test's own prefix (testredis cleans only
// the backend's).
func cleanupPrefix(t *testing.T, b *testredis.Backend, prefix string) {
	keys, _ := testredis.Keys(context.Background(), b.Client, prefix)
	for _, k := range keys {
		b.Client.Del(context.Background(), k)
	}
}

// TestReadThroughChild is one process of TestReadThroughProcesses.
func TestReadThroughChild(t *testing.T) {
	b := childBackend(t, envLoadChild, "TestReadThroughProcesses")
	ctx := testCtx(t)
	prefix := os.Getenv(envLoadPrefix)
	p := coldPromotion()
	m, _ := gradient.NewMatcher(p)
	// Every Load of every process counts in Redis.
	ld := LoaderFunc(func(ctx context.Context, id string) (*gradient.Promotion, error) {
		if err := b.Client.Incr(ctx, prefix+":loads").Err(); err != nil {
			return nil, err
		}
		time.Sleep(100 * time.Millisecond) // a slow source widens the window
		return &p, nil
	})
	c, err := New(b.Client, Options{Prefix: prefix, Loader: ld})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil { // "go"
		t.Fatal(err)
	}
	bad := stampede(ctx, c, m, 200)
	first := ""
	if len(bad) > 0 {
		first = bad[0]
	}
	fmt.Printf("done %d %q\n", len(bad), first)
}

// TestReadThroughProcesses: 4 processes (this test binary re-executed) ×
// 200 goroutines on a cold promotion make exactly 1 Load between them,
// and all 800 lines get the oracle's answer.
func TestReadThroughProcesses(t *testing.T) {
	t.Parallel()
	testredis.EachRealCtx(t, func(t *testing.T, ctx context.Context, b *testredis.Backend) {
		type proc struct {
			cmd *exec.Cmd
			in  interface{ Write([]byte) (int, error) }
			out *bufio.Scanner
		}
		procs := make([]*proc, 4)
		for i := range procs {
			cmd := exec.Command(os.Args[0], "-test.run=^TestReadThroughChild$", "-test.count=1")
			cmd.Env = testredis.ChildEnv(envLoadChild+"="+b.Name, envLoadPrefix+"="+b.Prefix)
			cmd.Stderr = os.Stderr
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			out := testredis.StartChildPipe(t, cmd, cmd.StdoutPipe)
			procs[i] = &proc{cmd: cmd, in: in, out: bufio.NewScanner(out)}
		}
		next := func(p *proc, prefix string) string {
			for p.out.Scan() {
				if line := p.out.Text(); strings.HasPrefix(line, prefix) {
					return line
				}
			}
			t.Fatalf("child ended before %q: %v", prefix, p.out.Err())
			return ""
		}
		for _, p := range procs {
			next(p, "ready")
		}
		for _, p := range procs {
			if _, err := p.in.Write([]byte("go\n")); err != nil {
				t.Fatal(err)
			}
		}
		total := 0
		for i, p := range procs {
			line := next(p, "done ")
			f := strings.SplitN(line, " ", 3)
			n, _ := strconv.Atoi(f[1])
			total += n
			if n != 0 {
				t.Errorf("process %d: %d bad lines, first %s", i, n, f[2])
			}
			if err := p.cmd.Wait(); err != nil {
				t.Errorf("process %d: %v", i, err)
			}
		}
		loads, err := b.Client.Get(ctx, b.Prefix+":loads").Int()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("4 processes x 200 goroutines: %d loads, %d bad lines", loads, total)
		if loads != 1 {
			t.Fatalf("%d loads, want exactly 1", loads)
		}
	})
}
