package budget_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/budget"
	"github.com/tierset/tierset/internal/testredis"
)

// The fault tests keep a history of every call, one line each:
// "R <order> <outcome>", "C <order> <outcome>", "L <order> <outcome>"
// (reserve, confirm, release), outcome ok, limit, lost or err (unknown:
// the call may or may not have taken effect). check compares it with
// what Redis holds at the end.

// capPromo is the promotion of the fault tests: at most limit uses in all,
// or per customer when perCustomer.
func capPromo(limit int64, perCustomer bool) budget.Promotion {
	c := budget.Cap{Measure: budget.Uses, Limit: limit}
	if perCustomer {
		c.Per = "customer"
	}
	return budget.Promotion{ID: "p", Caps: []budget.Cap{c}}
}

// workload is n reservations of one use (order prefix + i, customer i %
// customers), conc at a time; every 2nd grant is confirmed and every 5th
// released. Each call's outcome goes to emit.
type workload struct {
	prefix    string
	n, conc   int
	customers int
}

func (w workload) run(ctx context.Context, bg *budget.Budget, emit func(string)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range w.conc {
		wg.Go(func() {
			for i := range next {
				order := fmt.Sprintf("%s%d", w.prefix, i)
				_, err := bg.Reserve(ctx, budget.Request{Order: order, Attributes: customer(fmt.Sprint("c", i%w.customers)),
					Lines: line("p", 1, 0), Hold: 10 * time.Minute})
				emit("R " + order + " " + outcome(err))
				if err != nil {
					continue
				}
				switch {
				case i%2 == 0:
					_, err := bg.Confirm(ctx, order)
					emit("C " + order + " " + outcome(err))
				case i%5 == 1:
					_, err := bg.Release(ctx, order)
					emit("L " + order + " " + outcome(err))
				}
			}
		})
	}
	for i := range w.n {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
}

func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, budget.ErrLimit):
		return "limit"
	case errors.Is(err, budget.ErrLost):
		return "lost"
	}
	return "err"
}

// history is the calls seen, by order.
type history struct {
	mu    sync.Mutex
	calls map[string][]string // order -> "R ok", "C err", ...
	lines int
}

func newHistory() *history { return &history{calls: map[string][]string{}} }

func (h *history) add(line string) {
	f := strings.Fields(line)
	if len(f) != 3 {
		return // a line cut by a SIGKILL
	}
	h.mu.Lock()
	h.calls[f[1]] = append(h.calls[f[1]], f[0]+" "+f[2])
	h.lines++
	h.mu.Unlock()
}

// read adds every line of r until it ends.
func (h *history) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		h.add(sc.Text())
	}
}

func (h *history) count(call string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, cs := range h.calls {
		for _, c := range cs {
			if c == call {
				n++
			}
		}
	}
	return n
}

func (h *history) has(order, call string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.calls[order] {
		if c == call {
			return true
		}
	}
	return false
}

// state is what Redis holds at the end: each order's record state and
// the counters of promotion p.
type state struct {
	records map[string]string // order -> h, c, r or x
	cust    map[string]string // order -> its customer
	total   int64             // field u of c:p
	per     map[string]int64  // customer -> field u@customer=<c>
}

func readState(t *testing.T, ctx context.Context, c redis.UniversalClient, bg *budget.Budget) state {
	t.Helper()
	base := bg.Keys()[0]
	keys, err := testredis.Keys(ctx, c, base+"o:")
	if err != nil {
		t.Fatal(err)
	}
	s := state{records: map[string]string{}, cust: map[string]string{}, per: map[string]int64{}}
	for _, k := range keys {
		r, err := c.HMGet(ctx, k, "st", "req").Result()
		if err != nil {
			t.Fatal(err)
		}
		order := strings.TrimPrefix(k, base+"o:")
		s.records[order], _ = r[0].(string)
		req, _ := r[1].(string)
		attrs, _, err := budget.DecodeRequest(req)
		if err != nil {
			t.Fatal(err)
		}
		s.cust[order] = attrs["customer"]
	}
	fields, err := c.HGetAll(ctx, base+"c:p").Result()
	if err != nil {
		t.Fatal(err)
	}
	for f, v := range fields {
		var n int64
		fmt.Sscan(v, &n)
		switch f {
		case "_": // the counter's anchor (see intact in lua/lib.lua)
		case "u":
			s.total = n
		default:
			s.per[strings.TrimPrefix(f, "u@customer=")] = n
		}
	}
	return s
}

// check asserts the budget's guarantees on a history and the end state:
// the counter equals the held and confirmed records plus ledger (the
// redemptions a Rebuild put back) and never passes limit; every grant
// is confirmed, released or still held; every confirmed call left a
// confirmed record and every released one a released record. exact
// asks the counter to be at the limit (the demand was above it).
func check(t *testing.T, h *history, s state, limit int64, perCustomer bool, ledger int64, exact bool) {
	t.Helper()
	var live int64
	perLive := map[string]int64{}
	for order, st := range s.records {
		if st == "h" || st == "c" {
			live++
			perLive[s.cust[order]]++
		}
	}
	if perCustomer {
		for c, n := range perLive {
			if s.per[c] != n {
				t.Errorf("customer %s: counter %d, but %d held or confirmed records", c, s.per[c], n)
			}
		}
		for c, n := range s.per {
			if n > limit {
				t.Errorf("customer %s: counter %d over the cap %d", c, n, limit)
			}
			if exact && n != limit {
				t.Errorf("customer %s: counter %d, want the cap %d", c, n, limit)
			}
		}
	} else {
		if s.total != live+ledger {
			t.Errorf("counter %d, but %d held or confirmed records and %d redemptions rebuilt", s.total, live, ledger)
		}
		if s.total > limit {
			t.Errorf("counter %d over the cap %d", s.total, limit)
		}
		if exact && s.total != limit {
			t.Errorf("counter %d, want the cap %d", s.total, limit)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for order, calls := range h.calls {
		st := s.records[order]
		for _, c := range calls {
			switch c {
			case "R ok":
				if st == "" {
					t.Errorf("order %s: granted, then no record (%v)", order, calls)
				}
			case "C ok":
				if st != "c" {
					t.Errorf("order %s: confirmed, record %q (%v)", order, st, calls)
				}
			case "L ok":
				if st != "r" {
					t.Errorf("order %s: released, record %q (%v)", order, st, calls)
				}
			}
		}
	}
}
