package budget_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/faultproxy"
	"github.com/tierset/tierset/internal/soak"
	"github.com/tierset/tierset/internal/testredis"
)

// The child process of the multi-process tests: env names the server,
// prefix and workload; it prints one history line per call.
const (
	envChild = "TIERSET_BUDGET_CHILD" // "addr prefix limit perCustomer orderPrefix n conc customers"
)

func TestChildReserver(t *testing.T) {
	spec := os.Getenv(envChild)
	if spec == "" {
		t.Skip("child process of the multi-process tests only")
	}
	f := strings.Fields(spec)
	limit, _ := strconv.ParseInt(f[2], 10, 64)
	n, _ := strconv.Atoi(f[5])
	conc, _ := strconv.Atoi(f[6])
	customers, _ := strconv.Atoi(f[7])
	c := redis.NewClient(&redis.Options{Addr: f[0], ContextTimeoutEnabled: true, PoolSize: conc + 2})
	defer c.Close()
	bg, err := budget.New(c, "shop", budget.Options{Prefix: f[1], Promotions: []budget.Promotion{capPromo(limit, f[3] == "1")}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var mu sync.Mutex
	w := workload{prefix: f[4], n: n, conc: conc, customers: customers}
	w.run(context.Background(), bg, func(l string) {
		mu.Lock()
		fmt.Println(l)
		mu.Unlock()
	})
}

// startChild starts a child reserving on addr and feeds its lines to h;
// done closes when its output ends.
func startChild(t *testing.T, h *history, addr, prefix string, limit int64, perCustomer bool, orderPrefix string, n, conc, customers int) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	pc := "0"
	if perCustomer {
		pc = "1"
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildReserver$", "-test.count=1")
	cmd.Env = testredis.ChildEnv(envChild + "=" + strings.Join([]string{addr, prefix, strconv.FormatInt(limit, 10), pc, orderPrefix,
		strconv.Itoa(n), strconv.Itoa(conc), strconv.Itoa(customers)}, " "))
	cmd.Stderr = os.Stderr
	out := testredis.StartChildPipe(t, cmd, cmd.StdoutPipe)
	done := make(chan struct{})
	go func() { h.read(out); close(done) }()
	return cmd, done
}

func redisAddr(t *testing.T, b *testredis.Backend) string {
	t.Helper()
	c, ok := b.Client.(*redis.Client)
	if !ok {
		t.Skip("the child processes need a single server's address")
	}
	return c.Options().Addr
}

// TestFaultNoOversell: many processes reserve at once against one cap (or
// one cap per customer): exactly the cap is granted, never more, and the
// history agrees with Redis. Fast: 1,000 reservations from 4 processes;
// soak: 10,000 from 16.
func TestFaultNoOversell(t *testing.T) {
	procs := soak.Pick(16, 4)
	total := soak.Pick(10_000, 1_000)
	for _, tc := range []struct {
		name        string
		limit       int64
		perCustomer bool
		customers   int
	}{
		{"total", int64(total / 10), false, 1000},
		{"per customer", 5, true, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := testredis.Redis(t)
			ctx := testredis.Ctx(t)
			bg := newBudget(t, ctx, b, budget.Options{}, capPromo(tc.limit, tc.perCustomer))
			h := newHistory()
			var dones []<-chan struct{}
			for i := range procs {
				_, done := startChild(t, h, redisAddr(t, b), b.Prefix, tc.limit, tc.perCustomer, fmt.Sprintf("p%d-", i), total/procs, 16, tc.customers)
				dones = append(dones, done)
			}
			for _, d := range dones {
				<-d
			}
			s := readState(t, ctx, b.Client, bg)
			check(t, h, s, tc.limit, tc.perCustomer, 0, true)
			if n := h.count("R err") + h.count("C err") + h.count("L err"); n > 0 {
				t.Errorf("%d calls failed with no fault", n)
			}
			granted := h.count("R ok")
			if !tc.perCustomer && int64(granted-h.count("L ok")) != tc.limit {
				t.Errorf("granted %d, released %d: want %d held or confirmed", granted, h.count("L ok"), tc.limit)
			}
			t.Logf("%d processes, %d reservations: %d granted, %d refused, %d confirmed, %d released",
				procs, total, granted, h.count("R limit"), h.count("C ok"), h.count("L ok"))
		})
	}
}

// TestFaultCutAndKill: reservations, confirms and releases under cut
// replies (go-redis sends the script again: the same order answers the
// same reservation) and under CLIENT KILL of every connection: never over
// the cap, every grant accounted for, and the cap filled exactly (every
// call whose outcome was unknown left a hold that still counts).
func TestFaultCutAndKill(t *testing.T) {
	for _, fault := range []string{"cut", "kill"} {
		t.Run(fault, func(t *testing.T) {
			f := testredis.StartFaulty(t)
			ctx := testredis.Ctx(t)
			b := &testredis.Backend{Client: f.Cut, Prefix: testredis.Prefix(t)}
			const limit = 100
			bg := newBudget(t, ctx, b, budget.Options{}, capPromo(limit, false))
			admin := f.Server.Client(nil)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(time.Duration(1+rand.IntN(5)) * time.Millisecond):
					}
					if fault == "cut" {
						f.Proxy.CutNext(1, faultproxy.Contains("EVALSHA"))
					} else {
						_ = admin.ClientKillByFilter(ctx, "TYPE", "normal", "SKIPME", "yes").Err()
					}
				}
			})
			h := newHistory()
			workload{prefix: "o", n: 1000, conc: 16, customers: 10}.run(ctx, bg, h.add)
			close(stop)
			wg.Wait()
			s := readState(t, ctx, admin, bg)
			check(t, h, s, limit, false, 0, true)
			t.Logf("%s: %d cuts, %d granted, %d unknown reserves, %d unknown confirms", fault, f.Proxy.Cuts(),
				h.count("R ok"), h.count("R err"), h.count("C err"))
		})
	}
}

// TestFaultSIGKILL: processes SIGKILLed mid-reserve leave holds that count
// until they end; nothing passes the cap and the history of the calls
// that answered agrees with Redis.
func TestFaultSIGKILL(t *testing.T) {
	b := testredis.Redis(t)
	ctx := testredis.Ctx(t)
	const limit = 150
	bg := newBudget(t, ctx, b, budget.Options{}, capPromo(limit, false))
	h := newHistory()
	kills := soak.Pick(10, 3)
	for i := range kills {
		cmd, done := startChild(t, h, redisAddr(t, b), b.Prefix, limit, false, fmt.Sprintf("k%d-", i), 400, 8, 10)
		h.mu.Lock()
		before := h.lines
		h.mu.Unlock()
		deadline := time.Now().Add(20 * time.Second)
		for {
			h.mu.Lock()
			seen := h.lines
			h.mu.Unlock()
			if seen > before+20 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("child %d answered nothing in 20s", i)
			}
			time.Sleep(time.Millisecond) // a poll with a deadline
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-done
	}
	// One last process fills what is left.
	_, done := startChild(t, h, redisAddr(t, b), b.Prefix, limit, false, "last-", 1000, 8, 10)
	<-done
	s := readState(t, ctx, b.Client, bg)
	check(t, h, s, limit, false, 0, true)
	t.Logf("%d children killed; %d granted, %d records", kills, h.count("R ok"), len(s.records))
}

// TestFaultRestart: the private server restarts mid-run. With appendonly
// (appendfsync always) every grant survives; without it the data is
// gone, every call answers ErrLost until Rebuild puts back the ledger
// (the confirmations the history saw), and the cap is never passed across
// the loss.
func TestFaultRestart(t *testing.T) {
	for _, aof := range []bool{true, false} {
		t.Run(fmt.Sprint("appendonly=", aof), func(t *testing.T) {
			var args []string
			if aof {
				args = []string{"--appendonly", "yes", "--appendfsync", "always"}
			}
			srv := testredis.StartServer(t, args...)
			c := srv.Client(&redis.Options{MaxRetryBackoff: 20 * time.Millisecond})
			ctx := testredis.Ctx(t)
			b := &testredis.Backend{Client: c, Prefix: testredis.Prefix(t)}
			const limit = 100
			bg := newBudget(t, ctx, b, budget.Options{}, capPromo(limit, false))
			h := newHistory()
			workload{prefix: "a", n: 60, conc: 8, customers: 10}.run(ctx, bg, h.add)
			var wg sync.WaitGroup
			wg.Go(func() { workload{prefix: "b", n: 200, conc: 8, customers: 10}.run(ctx, bg, h.add) })
			// Restart once the second run is under way.
			deadline := time.Now().Add(20 * time.Second)
			for !h.has("b1", "R ok") && !h.has("b1", "R limit") {
				if time.Now().After(deadline) {
					t.Fatal("the second run answered nothing in 20s")
				}
				time.Sleep(time.Millisecond) // a poll with a deadline
			}
			srv.Restart()
			wg.Wait()
			var ledger int64
			unknown, lost := h.count("R err")+h.count("C err")+h.count("L err"), h.count("R lost")+h.count("C lost")+h.count("L lost")
			if !aof {
				// The ledger: every confirmation that answered ok before the
				// loss was found. A confirm that answered after a rebuild
				// would be in it too; here Rebuild comes after all calls.
				var reds []budget.Redemption
				h.mu.Lock()
				for order, calls := range h.calls {
					for _, c := range calls {
						if c == "C ok" {
							reds = append(reds, budget.Redemption{Lines: line("p", 1, 0), At: time.Now()})
							_ = order
						}
					}
				}
				h.mu.Unlock()
				if _, err := bg.Reserve(ctx, budget.Request{Order: "probe", Lines: line("p", 1, 0), Hold: time.Minute}); outcome(err) != "lost" {
					t.Fatalf("after the loss: %v", err)
				}
				if _, err := bg.Rebuild(ctx, reds); err != nil {
					t.Fatal(err)
				}
				ledger = int64(len(reds))
				// Records from before the loss are gone; the history is
				// checked against what is left, after the loss.
				h = newHistory()
			}
			workload{prefix: "c", n: 300, conc: 8, customers: 10}.run(ctx, bg, h.add)
			s := readState(t, ctx, c, bg)
			check(t, h, s, limit, false, ledger, true)
			t.Logf("aof=%v: %d unknown and %d lost outcomes around the restart; ledger %d, counter %d, %d records",
				aof, unknown, lost, ledger, s.total, len(s.records))
		})
	}
}
