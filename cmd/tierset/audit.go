package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/internal/keyscan"
	"github.com/tierset/tierset/internal/text"
)

const auditSynopsis = "tierset audit -redis URL [-match PATTERN] [-max-member BYTES] [-tierset-prefix P] [-json] [-examples N]"

// auditScanCount is the SCAN COUNT of an audit: with the TYPE filter a
// call of 100 keys holds the server about 1 ms (docs/benchmarks.md).
const auditScanCount = 100

// auditChunk bounds one ZRANGE: a large set is read in slices, so no
// single command holds the server for long.
const auditChunk = 1000

// auditKey is what audit found in one sorted set.
type auditKey struct {
	Key     string `json:"key"`
	Members int64  `json:"members"`
	// NonInteger counts scores with a fraction: money stored as a float
	// (99.99 is 99.989999...), which a threshold query reads wrongly.
	NonInteger int          `json:"non_integer_scores,omitempty"`
	Examples   []auditScore `json:"non_integer_examples,omitempty"`
	// Ties are runs of equal adjacent scores; the member a ZRANGE BYSCORE
	// REV LIMIT 0 1 answers today is the greatest by bytes.
	Ties      []auditTie   `json:"equal_scores,omitempty"`
	TiesTotal int          `json:"equal_score_runs,omitempty"`
	Large     []auditScore `json:"large_members,omitempty"`
	LargeN    int          `json:"large_member_count,omitempty"`
	NoTTL     bool         `json:"no_ttl,omitempty"`
}

type auditScore struct {
	Member string  `json:"member"`
	Score  float64 `json:"score"`
	Bytes  int     `json:"bytes,omitempty"`
}

type auditTie struct {
	Score   float64  `json:"score"`
	Members []string `json:"members"`
	Wins    string   `json:"wins_today"`
}

func (k *auditKey) found() bool {
	return k.NonInteger > 0 || k.TiesTotal > 0 || k.LargeN > 0 || k.NoTTL
}

// auditReport is the whole answer; -json prints it as is.
type auditReport struct {
	Pattern    string     `json:"pattern"`
	SortedSets int        `json:"sorted_sets"`
	Keys       []auditKey `json:"keys"`
	Damaged    []string   `json:"damaged_promotions,omitempty"`
	Summary    struct {
		NonInteger int `json:"keys_with_non_integer_scores"`
		Ties       int `json:"keys_with_equal_scores"`
		Large      int `json:"keys_with_large_members"`
		NoTTL      int `json:"keys_without_ttl"`
		Damaged    int `json:"damaged_promotions"`
	} `json:"summary"`
	// KeyspaceKeys is every key SCAN walked past (DBSIZE, summed over a
	// cluster's masters), TookMs how long the audit took.
	KeyspaceKeys int64 `json:"keyspace_keys"`
	TookMs       int64 `json:"took_ms"`
}

func dbSize(ctx context.Context, c redis.UniversalClient) (int64, error) {
	if cc, ok := c.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		var n int64
		err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			v, err := m.DBSize(ctx).Result()
			mu.Lock()
			n += v
			mu.Unlock()
			return err
		})
		return n, err
	}
	return c.DBSize(ctx).Result()
}

func cmdAudit(ctx context.Context, args []string, e *env) error {
	fs := newFlags("audit", auditSynopsis)
	redisURL := fs.String("redis", "", "Redis: host:port, a redis:// or rediss:// `URL`, or comma-separated cluster seeds; required")
	pattern := fs.String("match", "*", "SCAN `pattern` of the sorted sets to audit")
	maxMember := fs.Int("max-member", 1024, "report members larger than this many `bytes`")
	prefix := fs.String("tierset-prefix", cache.DefaultPrefix, "check tierset's own promotions under this key `prefix` for damage (\"\" skips it)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	examples := fs.Int("examples", 3, "list at most `N` examples of each finding per key")
	if err := fs.parse(args, e); err != nil {
		return err
	}
	if *redisURL == "" {
		return usagef("-redis is required: audit reads an existing Redis")
	}
	if *maxMember < 1 || *examples < 0 {
		return usagef("-max-member wants ≥ 1 and -examples ≥ 0")
	}
	be, err := connect(ctx, *redisURL, e)
	if err != nil {
		return err
	}
	defer be.close()
	own := ""
	if *prefix != "" {
		own = *prefix + ":{p:"
	}
	start := time.Now()
	rep := auditReport{Pattern: *pattern, Keys: []auditKey{}}
	var mu sync.Mutex
	seen := map[string]bool{}
	err = keyscan.EachType(ctx, be.client, *pattern, "zset", auditScanCount, func(ctx context.Context, node redis.Cmdable, key string) error {
		mu.Lock()
		dup := seen[key]
		seen[key] = true
		mu.Unlock()
		if dup { // SCAN may return a key twice
			return nil
		}
		k, err := auditOne(ctx, node, key, *maxMember, *examples)
		if err != nil {
			return fmt.Errorf("key %s: %w", text.Quote(key), err)
		}
		if own != "" && strings.HasPrefix(key, own) {
			k.NoTTL = false // tierset's ladders live until refreshed or their window ends
		}
		mu.Lock()
		defer mu.Unlock()
		rep.SortedSets++
		if k.found() {
			rep.Keys = append(rep.Keys, k)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if *prefix != "" {
		c, err := cache.New(be.client, cache.Options{Prefix: *prefix})
		if err != nil {
			return usagef("-tierset-prefix: %v", err)
		}
		ids, err := c.IDs(ctx)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if _, err := c.Info(ctx, id); errors.Is(err, cache.ErrDamaged) {
				rep.Damaged = append(rep.Damaged, id)
			} else if err != nil && !errors.Is(err, cache.ErrNotFound) {
				return err
			}
		}
	}
	rep.TookMs = time.Since(start).Milliseconds()
	if rep.KeyspaceKeys, err = dbSize(ctx, be.client); err != nil {
		return err
	}
	sort.Slice(rep.Keys, func(i, j int) bool { return rep.Keys[i].Key < rep.Keys[j].Key })
	for _, k := range rep.Keys {
		rep.Summary.NonInteger += b2i(k.NonInteger > 0)
		rep.Summary.Ties += b2i(k.TiesTotal > 0)
		rep.Summary.Large += b2i(k.LargeN > 0)
		rep.Summary.NoTTL += b2i(k.NoTTL)
	}
	rep.Summary.Damaged = len(rep.Damaged)
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printAudit(e.stdout, &rep, len(seen), time.Duration(rep.TookMs)*time.Millisecond)
	}
	if len(rep.Keys) > 0 || len(rep.Damaged) > 0 {
		return errAuditFound
	}
	return nil
}

// errAuditFound makes the exit code 1 once the report is printed.
var errAuditFound = errors.New("findings above")

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// auditOne reads one sorted set in slices of auditChunk, ascending.
func auditOne(ctx context.Context, node redis.Cmdable, key string, maxMember, examples int) (auditKey, error) {
	k := auditKey{Key: key}
	pipe := node.Pipeline()
	card := pipe.ZCard(ctx, key)
	ttl := pipe.TTL(ctx, key)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return k, err
	}
	k.Members = card.Val()
	k.NoTTL = ttl.Val() == -1 // -2: gone since the SCAN
	var prev *redis.Z
	var run []string
	flush := func() {
		if len(run) > 1 {
			k.TiesTotal++
			if len(k.Ties) < examples {
				// REV order ranks equal scores by member bytes, greatest first.
				wins := run[0]
				for _, m := range run {
					if m > wins {
						wins = m
					}
				}
				k.Ties = append(k.Ties, auditTie{Score: prev.Score, Members: append([]string(nil), run...), Wins: wins})
			}
		}
		run = run[:0]
	}
	for off := int64(0); off < k.Members; off += auditChunk {
		zs, err := node.ZRangeWithScores(ctx, key, off, off+auditChunk-1).Result()
		if err != nil {
			return k, err
		}
		for i := range zs {
			z := zs[i]
			m, _ := z.Member.(string)
			if z.Score != math.Trunc(z.Score) {
				k.NonInteger++
				if len(k.Examples) < examples {
					k.Examples = append(k.Examples, auditScore{Member: m, Score: z.Score})
				}
			}
			if len(m) > maxMember {
				k.LargeN++
				if len(k.Large) < examples {
					k.Large = append(k.Large, auditScore{Member: m[:min(len(m), 64)], Score: z.Score, Bytes: len(m)})
				}
			}
			if prev != nil && prev.Score == z.Score {
				if len(run) == 0 {
					pm, _ := prev.Member.(string)
					run = append(run, pm)
				}
				run = append(run, m)
			} else {
				flush()
			}
			prev = &z
		}
		if len(zs) == 0 {
			break
		}
	}
	flush()
	return k, nil
}

func printAudit(w io.Writer, rep *auditReport, scanned int, took time.Duration) {
	for _, k := range rep.Keys {
		fmt.Fprintf(w, "%s (%s)\n", text.Quote(k.Key), count(int(k.Members), "member", "members"))
		if k.NonInteger > 0 {
			fmt.Fprintf(w, "  %s with a fraction (money stored as a float?):", count(k.NonInteger, "score", "scores"))
			for _, x := range k.Examples {
				fmt.Fprintf(w, " %s=%s", text.Quote(x.Member), strconv.FormatFloat(x.Score, 'g', 17, 64))
			}
			fmt.Fprintln(w)
		}
		for _, t := range k.Ties {
			fmt.Fprintf(w, "  equal scores %s: %s; a REV BYSCORE LIMIT 0 1 answers %s today (the greatest member bytes)\n",
				strconv.FormatFloat(t.Score, 'g', 17, 64), escapeJoin(t.Members), text.Quote(t.Wins))
		}
		if more := k.TiesTotal - len(k.Ties); more > 0 {
			fmt.Fprintf(w, "  … and %s of equal scores\n", count(more, "more run", "more runs"))
		}
		if k.LargeN > 0 {
			fmt.Fprintf(w, "  %s over the bound:", count(k.LargeN, "member", "members"))
			for _, x := range k.Large {
				fmt.Fprintf(w, " %s… (%d bytes)", text.Quote(x.Member), x.Bytes)
			}
			fmt.Fprintln(w)
		}
		if k.NoTTL {
			fmt.Fprintln(w, "  no TTL")
		}
	}
	for _, id := range rep.Damaged {
		fmt.Fprintf(w, "tierset promotion %s is damaged (a key evicted or deleted): warm it again\n", text.Quote(id))
	}
	s := rep.Summary
	fmt.Fprintf(w, "summary: %s matching %s; non-integer scores in %d, equal scores in %d, large members in %d, no TTL on %d; %s\n",
		count(rep.SortedSets, "sorted set", "sorted sets"), text.Quote(rep.Pattern), s.NonInteger, s.Ties, s.Large, s.NoTTL,
		count(s.Damaged, "damaged tierset promotion", "damaged tierset promotions"))
	fmt.Fprintf(w, "scanned a keyspace of %s (%s audited) in %v\n", count(int(rep.KeyspaceKeys), "key", "keys"),
		count(scanned, "sorted set", "sorted sets"), took.Round(time.Millisecond))
}
