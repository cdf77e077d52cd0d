package storm

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/cache"
)

// childEnv marks the bench binary re-executed as a storm client; its
// value is the JSON of childConfig.
const childEnv = "TIERSET_BENCH_STORM_CHILD"

// childConfig is what the parent tells each client process.
type childConfig struct {
	URL        string
	Prefix     string
	Promotions int
	Lines      int
	Workers    int
	Pause      time.Duration
	Seed       uint64
}

// IsChild reports whether this process is a storm client.
func IsChild() bool { return os.Getenv(childEnv) != "" }

// ChildMain runs a storm client: it reads commands on stdin ("phase N",
// "stop") and writes one JSON childReport on stdout at the end. It
// returns the exit code.
func ChildMain() int {
	var cfg childConfig
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "storm child:", err)
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := runChild(ctx, cfg, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "storm child:", err)
		return 1
	}
	return 0
}

// phaseStats is one client process's figures for one phase.
type phaseStats struct {
	Lat      []int32 // cart latencies, µs
	Carts    int64
	Older    int64 // carts with a line priced from an older content than the process already used
	LineErrs int64
	Near     cache.NearStats // at the phase's start
}

type childReport struct {
	Phases   []phaseStats
	NearEnd  cache.NearStats
	HeapHeld uint64 // heap in use after warm-up minus before, bytes
	Held     int    // ladders held after warm-up
	HeldB    int64  // their accounted bytes
}

// seen is the newest content (seq) of one promotion the process answered,
// and the earliest return of a cart that answered it.
type seen struct {
	mu  sync.Mutex
	seq int
	at  int64
}

func runChild(ctx context.Context, cfg childConfig, in io.Reader, out io.Writer) error {
	opt, err := redis.ParseURL(cfg.URL)
	if err != nil {
		return err
	}
	opt.ContextTimeoutEnabled = true
	opt.PoolSize = 4 * cfg.Workers
	client := redis.NewClient(opt)
	defer client.Close()
	var ms0 runtimeMem
	ms0.read()
	c, err := cache.New(client, cache.Options{Prefix: cfg.Prefix, NearCache: &cache.NearCacheOptions{}})
	if err != nil {
		return err
	}
	defer c.Close()
	// Warm: every promotion once, in carts of 100 lines, until all are
	// answered from memory.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if time.Now().After(deadline) {
			return fmt.Errorf("not warm in 60 s: %+v", c.NearStats())
		}
		if !c.NearStats().Tracking {
			_, _ = c.Match(ctx, cache.QuantityQuery(promoID(0), 1), cache.MatchOptions{})
			time.Sleep(time.Millisecond)
			continue
		}
		for i := 0; i < cfg.Promotions; i += 100 {
			qs := make([]cache.Query, 0, 100)
			for k := i; k < min(i+100, cfg.Promotions); k++ {
				qs = append(qs, cache.QuantityQuery(promoID(k), 1))
			}
			if _, err := c.MatchCart(ctx, qs, cache.MatchOptions{}); err != nil {
				return err
			}
		}
		if c.NearStats().Promotions >= cfg.Promotions {
			break
		}
	}
	var ms1 runtimeMem
	ms1.read()
	ns := c.NearStats()
	rep := childReport{HeapHeld: ms1.heap - ms0.heap, Held: ns.Promotions, HeldB: ns.Bytes}

	seens := make([]seen, cfg.Promotions)
	var phase atomic.Int32
	phase.Store(-1)
	const maxPhases = 8
	stats := make([][]phaseStats, cfg.Workers) // by worker, then phase
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range cfg.Workers {
		stats[w] = make([]phaseStats, maxPhases)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(cfg.Seed, uint64(os.Getpid())<<8|uint64(w)))
			z := rand.NewZipf(r, zipfS, 1, uint64(cfg.Promotions-1))
			qs := make([]cache.Query, cfg.Lines)
			idx := make([]int, cfg.Lines)
			for !stop.Load() {
				p := phase.Load()
				pickCart(z, idx)
				for k, i := range idx {
					qs[k] = cache.QuantityQuery(promoID(i), int64(1+r.IntN(20)))
				}
				start := time.Now()
				rs, err := c.MatchCart(ctx, qs, cache.MatchOptions{})
				end := time.Now()
				if p < 0 || int(p) >= maxPhases {
					time.Sleep(cfg.Pause)
					continue
				}
				st := &stats[w][p]
				st.Carts++
				st.Lat = append(st.Lat, int32(end.Sub(start).Microseconds()))
				older := false
				for k, res := range rs {
					if err != nil || res.Err != nil || res.Tier == nil {
						st.LineErrs++
						continue
					}
					q := seqOf(res.Tier.ID)
					s := &seens[idx[k]]
					s.mu.Lock()
					if q < s.seq && start.UnixNano() > s.at {
						older = true
					}
					switch {
					case q > s.seq:
						s.seq, s.at = q, end.UnixNano()
					case q == s.seq && end.UnixNano() < s.at:
						s.at = end.UnixNano()
					}
					s.mu.Unlock()
				}
				if older {
					st.Older++
				}
				time.Sleep(cfg.Pause)
			}
		}()
	}
	fmt.Fprintln(out, "ready")
	near := make([]cache.NearStats, maxPhases)
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "phase" {
			n, _ := strconv.Atoi(f[1])
			if n >= 0 && n < maxPhases {
				near[n] = c.NearStats()
				phase.Store(int32(n))
			}
			fmt.Fprintln(out, "ok")
			continue
		}
		if len(f) == 1 && f[0] == "stop" {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	rep.NearEnd = c.NearStats()
	for p := range maxPhases {
		ps := phaseStats{Near: near[p]}
		for w := range stats {
			s := &stats[w][p]
			ps.Lat = append(ps.Lat, s.Lat...)
			ps.Carts += s.Carts
			ps.Older += s.Older
			ps.LineErrs += s.LineErrs
		}
		rep.Phases = append(rep.Phases, ps)
	}
	return json.NewEncoder(out).Encode(rep)
}

// pickCart fills idx with distinct Zipf-skewed promotion indexes.
func pickCart(z *rand.Zipf, idx []int) {
	for k := range idx {
		for {
			i := int(z.Uint64())
			dup := false
			for _, j := range idx[:k] {
				dup = dup || j == i
			}
			if !dup {
				idx[k] = i
				break
			}
		}
	}
}

// seqOf reads the content sequence from a tier ID "t<k>.<seq>".
func seqOf(id string) int {
	i := strings.LastIndexByte(id, '.')
	n, _ := strconv.Atoi(id[i+1:])
	return n
}
