// Package storm is the bench's sale-storm phase: several client
// processes (the bench binary re-executed, each with its own near cache
// and tracking connection) price Zipf-skewed carts over many promotions
// while the hottest promotions change every second, then while every
// promotion is republished at once (half of them unchanged). It prints
// cart p50/p99, Redis CPU and Redis commands per 1,000 carts per phase,
// the ladder reads per changed promotion and the carts priced from an
// older content than their process already used.
package storm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/gradient"
)

// zipfS is the skew of the carts' promotions (rank r drawn ∝ 1/(1+r)^s).
const zipfS = 1.1

// Config is one storm run.
type Config struct {
	URL        string // the Redis every process connects to
	Prefix     string
	Quick      bool
	Procs      int // client processes; default 8
	Promotions int // default 10000
	Hot        int // promotions changed every second; default 100
	Lines      int // lines per cart; default 20
	Seed       uint64
	Out, Log   io.Writer
}

// promoID names promotion i.
func promoID(i int) string { return "p" + strconv.Itoa(i) }

// promotion is promotion i with content seq at revision rev: five
// quantity tiers whose IDs carry seq, so an answer names its content.
func promotion(i, seq int, rev int64) gradient.Promotion {
	p := gradient.Promotion{ID: promoID(i), Metric: gradient.Quantity, Revision: rev}
	for k := int64(0); k < 5; k++ {
		p.Tiers = append(p.Tiers, gradient.Tier{
			ID:        fmt.Sprintf("t%d.%d", k, seq),
			Threshold: decimal.NewFromInt(1 << k),
			Reward:    gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(5 + k + int64(seq%7))},
		})
	}
	return p
}

// phase is one measured stretch.
type phase struct {
	name string
	// changed and invalidated count the promotions written with other
	// content, and all written, during the phase.
	changed, invalidated int
	cpu                  float64 // Redis used_cpu_sys+user, s
	cmds                 int64   // Redis commandstats calls
	wall                 time.Duration
}

type proc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// Run runs the storm and prints its table.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Procs == 0 {
		cfg.Procs = 8
	}
	if cfg.Promotions == 0 {
		cfg.Promotions = 10000
	}
	if cfg.Hot == 0 {
		cfg.Hot = 100
	}
	if cfg.Lines == 0 {
		cfg.Lines = 20
	}
	steady, hot, after := 10*time.Second, 30*time.Second, 10*time.Second
	if cfg.Quick {
		steady, hot, after = 3*time.Second, 5*time.Second, 3*time.Second
	}
	opt, err := redis.ParseURL(cfg.URL)
	if err != nil {
		return err
	}
	opt.ContextTimeoutEnabled = true
	client := redis.NewClient(opt)
	defer client.Close()
	w, err := cache.New(client, cache.Options{Prefix: cfg.Prefix})
	if err != nil {
		return err
	}
	seq := make([]int, cfg.Promotions)
	rev := int64(1)
	all := make([]gradient.Promotion, cfg.Promotions)
	for i := range all {
		all[i] = promotion(i, 0, rev)
	}
	if err := refreshAll(ctx, w, all); err != nil {
		return err
	}
	fmt.Fprintf(cfg.Log, "storm: %d promotions written; starting %d client processes\n", cfg.Promotions, cfg.Procs)

	exe, err := os.Executable()
	if err != nil {
		return err
	}
	ccfg, _ := json.Marshal(childConfig{URL: cfg.URL, Prefix: cfg.Prefix, Promotions: cfg.Promotions, Lines: cfg.Lines,
		Workers: 2, Pause: time.Millisecond, Seed: cfg.Seed})
	procs := make([]*proc, cfg.Procs)
	defer func() {
		for _, p := range procs {
			if p != nil && p.cmd.Process != nil {
				_ = p.cmd.Process.Kill()
				_ = p.cmd.Wait()
			}
		}
	}()
	for k := range procs {
		cmd := exec.CommandContext(ctx, exe)
		cmd.Env = append(os.Environ(), childEnv+"="+string(ccfg))
		cmd.Stderr = cfg.Log
		in, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		procs[k] = &proc{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	}
	for k, p := range procs {
		if line, err := p.out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
			return fmt.Errorf("client %d: %q %v", k, line, err)
		}
	}
	send := func(cmd string) error {
		for k, p := range procs {
			if _, err := io.WriteString(p.in, cmd+"\n"); err != nil {
				return fmt.Errorf("client %d: %w", k, err)
			}
		}
		if cmd == "stop" {
			return nil
		}
		for k, p := range procs {
			if line, err := p.out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ok" {
				return fmt.Errorf("client %d: %q %v", k, line, err)
			}
		}
		return nil
	}
	var phases []*phase
	var cpu0 float64
	var cmds0 int64
	var t0 time.Time
	begin := func(name string) error {
		if len(phases) > 0 {
			if err := end(ctx, client, phases[len(phases)-1], cpu0, cmds0, t0); err != nil {
				return err
			}
		}
		if name == "" {
			return nil
		}
		if err := send("phase " + strconv.Itoa(len(phases))); err != nil {
			return err
		}
		ph := &phase{name: name}
		phases = append(phases, ph)
		var err error
		cpu0, cmds0, err = redisCounters(ctx, client)
		t0 = time.Now()
		return err
	}
	sleep := func(d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	if err := begin("steady"); err != nil {
		return err
	}
	if err := sleep(steady); err != nil {
		return err
	}
	if err := begin(fmt.Sprintf("hot edits (%d promotions/s, %v)", cfg.Hot, hot)); err != nil {
		return err
	}
	tick := time.NewTicker(time.Second)
	for stop := time.Now().Add(hot); time.Now().Before(stop); {
		rev++
		batch := make([]gradient.Promotion, cfg.Hot)
		for i := range batch {
			seq[i]++
			batch[i] = promotion(i, seq[i], rev)
		}
		if _, err := w.Refresh(ctx, batch...); err != nil {
			return err
		}
		phases[len(phases)-1].changed += cfg.Hot
		phases[len(phases)-1].invalidated += cfg.Hot
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	tick.Stop()
	if err := begin("10 s after the hot edits"); err != nil {
		return err
	}
	if err := sleep(after); err != nil {
		return err
	}
	if err := begin(fmt.Sprintf("republish all %d (half unchanged)", cfg.Promotions)); err != nil {
		return err
	}
	rev++
	for i := range all {
		if i%2 == 0 {
			seq[i]++
		}
		all[i] = promotion(i, seq[i], rev)
	}
	if err := refreshAll(ctx, w, all); err != nil {
		return err
	}
	phases[len(phases)-1].changed = (cfg.Promotions + 1) / 2
	phases[len(phases)-1].invalidated = cfg.Promotions
	if err := begin("10 s after the republish"); err != nil {
		return err
	}
	if err := sleep(after); err != nil {
		return err
	}
	if err := begin(""); err != nil {
		return err
	}
	if err := send("stop"); err != nil {
		return err
	}
	reps := make([]childReport, len(procs))
	for k, p := range procs {
		if err := json.NewDecoder(p.out).Decode(&reps[k]); err != nil {
			return fmt.Errorf("client %d report: %w", k, err)
		}
		_ = p.in.Close()
		_ = p.cmd.Wait()
		procs[k] = nil
	}
	report(cfg, phases, reps)
	return nil
}

// refreshAll writes ps from 16 writers at once, in batches of 100.
func refreshAll(ctx context.Context, w *cache.Cache, ps []gradient.Promotion) error {
	const writers, batch = 16, 100
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for k := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := k * batch; i < len(ps); i += writers * batch {
				if _, err := w.Refresh(ctx, ps[i:min(i+batch, len(ps))]...); err != nil {
					errs[k] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// end closes phase ph: Redis's counters and the wall time since it began.
func end(ctx context.Context, client *redis.Client, ph *phase, cpu0 float64, cmds0 int64, t0 time.Time) error {
	cpu, cmds, err := redisCounters(ctx, client)
	ph.cpu, ph.cmds, ph.wall = cpu-cpu0, cmds-cmds0, time.Since(t0)
	return err
}

// redisCounters reads used_cpu_sys+used_cpu_user and the sum of
// commandstats calls.
func redisCounters(ctx context.Context, client *redis.Client) (cpu float64, calls int64, err error) {
	s, err := client.Info(ctx, "cpu", "commandstats").Result()
	if err != nil {
		return 0, 0, err
	}
	cpu, calls = parseCounters(s)
	return cpu, calls, nil
}

// parseCounters reads used_cpu_sys+used_cpu_user and the sum of
// commandstats calls from an INFO reply.
func parseCounters(s string) (cpu float64, calls int64) {
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "used_cpu_sys:"), strings.HasPrefix(line, "used_cpu_user:"):
			v, _ := strconv.ParseFloat(line[strings.IndexByte(line, ':')+1:], 64)
			cpu += v
		case strings.HasPrefix(line, "cmdstat_"):
			i := strings.Index(line, "calls=")
			if i < 0 {
				continue
			}
			rest := line[i+len("calls="):]
			if j := strings.IndexByte(rest, ','); j >= 0 {
				rest = rest[:j]
			}
			n, _ := strconv.ParseInt(rest, 10, 64)
			calls += n
		}
	}
	return cpu, calls
}

func report(cfg Config, phases []*phase, reps []childReport) {
	out := cfg.Out
	fmt.Fprintf(out, "\nsale storm: %d client processes × 2 carts in flight (1 ms pause), %d-line Zipf(s=%.1f) carts over %d promotions, near cache defaults\n",
		len(reps), cfg.Lines, zipfS, cfg.Promotions)
	var heap uint64
	var held int
	var heldB int64
	for _, r := range reps {
		heap += r.HeapHeld
		held += r.Held
		heldB += r.HeldB
	}
	if held > 0 {
		fmt.Fprintf(out, "held after warm-up: %d ladders per process; heap %d B per ladder (accounted %d B)\n",
			held/len(reps), int64(heap)/int64(held), heldB/int64(held))
	}
	fmt.Fprintf(out, "| phase | carts | p50 | p99 | p99 / steady | Redis CPU | Redis cmds / 1k carts | ladder reads / changed promo / process | re-reads / invalidated promo / process | unchanged kept | tracking lost | older-content carts |\n")
	fmt.Fprintf(out, "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	var steadyP99 float64
	for p, ph := range phases {
		var lat []int32
		var carts, older int64
		var reads, rereads, kept, lost int64
		for _, r := range reps {
			st := r.Phases[p]
			lat = append(lat, st.Lat...)
			carts += st.Carts
			older += st.Older
			next := r.NearEnd
			if p+1 < len(phases) {
				next = r.Phases[p+1].Near
			}
			reads += next.LadderReads - st.Near.LadderReads
			rereads += next.Rereads - st.Near.Rereads
			kept += next.Unchanged - st.Near.Unchanged
			lost += next.TrackingLost - st.Near.TrackingLost
		}
		slices.Sort(lat)
		p50, p99 := pct(lat, 0.50), pct(lat, 0.99)
		if p == 0 {
			steadyP99 = p99
		}
		per := func(n int64, of int) string {
			if of == 0 {
				return fmt.Sprintf("%d total", n)
			}
			return fmt.Sprintf("%.2f", float64(n)/float64(len(reps))/float64(of))
		}
		cmdsPer := 0.0
		if carts > 0 {
			cmdsPer = float64(ph.cmds) / float64(carts) * 1000
		}
		fmt.Fprintf(out, "| %s | %d | %.0f µs | %.0f µs | %.2f× | %.2f s (%.0f%% of %v) | %.0f | %s | %s | %d | %d | %d |\n",
			ph.name, carts, p50, p99, p99/steadyP99, ph.cpu, 100*ph.cpu/ph.wall.Seconds(), ph.wall.Round(100*time.Millisecond),
			cmdsPer, per(reads, ph.changed), per(rereads, ph.invalidated), kept, lost, older)
	}
}

func pct(s []int32, q float64) float64 {
	if len(s) == 0 {
		return 0
	}
	return float64(s[min(len(s)-1, int(q*float64(len(s))))])
}

// runtimeMem is the heap in use after a GC.
type runtimeMem struct{ heap uint64 }

func (m *runtimeMem) read() {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.heap = ms.HeapAlloc
}
