package main

import (
	"context"
	"encoding/base64"
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
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/internal/keyname"
	"github.com/tierset/tierset/internal/keyscan"
	"github.com/tierset/tierset/internal/text"
)

const auditSynopsis = "tierset audit -redis URL [-match PATTERN] [-max-member BYTES] [-tierset-prefix P] [-json] [-examples N]"

// auditScanCount is the SCAN COUNT of an audit: with the TYPE filter a
// call of 100 keys holds the server well under a millisecond of CPU
// (docs/benchmarks.md, "Audit").
const auditScanCount = 100

// auditChunk bounds one ZRANGE: a large set is read in slices, so no
// single command holds the server for long.
const auditChunk = 1000

// auditKey is what audit found in one sorted set.
type auditKey struct {
	Key     auditText `json:"key"`
	Members int64     `json:"members"`
	// NonInteger counts scores with a fraction: money stored as a float
	// (99.99 is 99.989999...), which a threshold query reads wrongly.
	NonInteger int          `json:"non_integer_scores,omitempty"`
	Examples   []auditScore `json:"non_integer_examples,omitempty"`
	// Inexact counts scores a double cannot hold exactly as integers:
	// beyond ±2^53 (9007199254740993 is stored as …992, so two thresholds
	// collide) or infinite. 1e300 and -inf, which ZADD accepts, land here.
	Inexact         int          `json:"inexact_scores,omitempty"`
	InexactExamples []auditScore `json:"inexact_examples,omitempty"`
	// Ties are runs of equal adjacent scores; the member a ZRANGE BYSCORE
	// REV LIMIT 0 1 answers today is the greatest by bytes.
	Ties      []auditTie   `json:"equal_scores,omitempty"`
	TiesTotal int          `json:"equal_score_runs,omitempty"`
	Large     []auditScore `json:"large_members,omitempty"`
	LargeN    int          `json:"large_member_count,omitempty"`
	NoTTL     bool         `json:"no_ttl,omitempty"`
}

type auditScore struct {
	Member auditText  `json:"member"`
	Score  auditFloat `json:"score"`
	Bytes  int        `json:"bytes,omitempty"`
}

// auditTie is one run of equal scores: its size and at most -examples of
// its members (the first by bytes), never the whole run, so a run of
// millions costs what a run of a few does.
type auditTie struct {
	Score   auditFloat  `json:"score"`
	Count   int         `json:"count"`
	Members []auditText `json:"members"`
	Wins    auditText   `json:"wins_today"`
}

// auditText is a key or member as Redis holds it, bytes that need not be
// UTF-8. JSON has no bytes, and encoding/json would turn every invalid
// byte into U+FFFD (\xff\x01 and \xfe\x01 alike), so valid UTF-8 is
// a JSON string and anything else an object {"base64": ...} of its exact
// bytes (standard encoding): distinct, and reversible.
//
// One over the report's bound (newAuditText) keeps only its first
// auditCut bytes and its size, so neither the memory an audit holds nor
// the report grows with the size of a member: in JSON {"prefix": ...,
// "bytes": N}, or {"prefix_base64": ..., "bytes": N} when the prefix is
// not UTF-8; in text the Go-quoted prefix, "…" and the size.
type auditText struct {
	s string // the bytes, or their first auditCut when n > len(s)
	n int    // the full length
}

// auditCut is how much of a key or member over the bound is kept.
const auditCut = 64

// wholeText is s kept whole.
func wholeText(s string) auditText { return auditText{s: s, n: len(s)} }

// newAuditText is s whole when it has at most max(bound, auditCut)
// bytes, else its first auditCut bytes (a copy, so the rest of s can be
// freed) and its length.
func newAuditText(s string, bound int) auditText {
	if len(s) <= max(bound, auditCut) {
		return wholeText(s)
	}
	return auditText{s: strings.Clone(auditPrefix(s, auditCut)), n: len(s)}
}

func (t auditText) cut() bool { return t.n > len(t.s) }

func (t auditText) MarshalJSON() ([]byte, error) {
	valid := utf8.ValidString(t.s)
	switch {
	case t.cut() && valid:
		return json.Marshal(struct {
			Prefix string `json:"prefix"`
			Bytes  int    `json:"bytes"`
		}{t.s, t.n})
	case t.cut():
		return json.Marshal(struct {
			Prefix string `json:"prefix_base64"`
			Bytes  int    `json:"bytes"`
		}{base64.StdEncoding.EncodeToString([]byte(t.s)), t.n})
	case valid:
		return json.Marshal(t.s)
	}
	return json.Marshal(struct {
		Base64 string `json:"base64"`
	}{base64.StdEncoding.EncodeToString([]byte(t.s))})
}

// quote is t for the text report: Go-quoted (bytes that are not UTF-8
// and control characters as escapes, so distinct texts print distinctly
// and none reaches the terminal raw), then "… (N bytes)" when cut.
func (t auditText) quote() string {
	if t.cut() {
		return strconv.Quote(t.s) + "… (" + strconv.Itoa(t.n) + " bytes)"
	}
	return strconv.Quote(t.s)
}

// auditFloat is a score. JSON has no infinities (encoding/json refuses
// them, and the report would be lost), so ±inf, which ZADD accepts,
// prints as the strings "+inf" and "-inf", as Redis writes them.
type auditFloat float64

func (f auditFloat) MarshalJSON() ([]byte, error) {
	if math.IsInf(float64(f), 0) {
		return json.Marshal(f.String())
	}
	return json.Marshal(float64(f))
}

// String is the score for the text report: every digit of the float
// (99.99 reads 99.989999999999995), or +inf, -inf.
func (f auditFloat) String() string {
	switch {
	case math.IsInf(float64(f), 1):
		return "+inf"
	case math.IsInf(float64(f), -1):
		return "-inf"
	}
	return strconv.FormatFloat(float64(f), 'g', 17, 64)
}

// auditPrefix is at most max bytes of m, cut on a rune boundary when m
// is UTF-8 (a cut rune would make a readable member print as bytes).
func auditPrefix(m string, max int) string {
	if len(m) <= max {
		return m
	}
	cut := max
	if utf8.ValidString(m) {
		for cut > 0 && !utf8.RuneStart(m[cut]) {
			cut--
		}
	}
	return m[:cut]
}

func (k *auditKey) found() bool {
	return k.NonInteger > 0 || k.Inexact > 0 || k.TiesTotal > 0 || k.LargeN > 0 || k.NoTTL
}

// auditReport is the whole answer; -json prints it as is.
type auditReport struct {
	Pattern    auditText  `json:"pattern"` // as given: bytes too, like a key
	SortedSets int        `json:"sorted_sets"`
	Keys       []auditKey `json:"keys"`
	Damaged    []string   `json:"damaged_promotions,omitempty"`
	// Unindexed are promotions stored but missing from the promotion
	// index, so List skips them: written by a v0.1.0 writer or restored
	// by hand after the prefix was indexed (cache.Cache.Reindex adds them).
	Unindexed []string `json:"unindexed_promotions,omitempty"`
	Summary   struct {
		NonInteger int `json:"keys_with_non_integer_scores"`
		Inexact    int `json:"keys_with_inexact_scores"`
		Ties       int `json:"keys_with_equal_scores"`
		Large      int `json:"keys_with_large_members"`
		NoTTL      int `json:"keys_without_ttl"`
		Damaged    int `json:"damaged_promotions"`
	} `json:"summary"`
	// KeyspaceKeys is every key SCAN walked past (DBSIZE, summed over a
	// cluster's masters), TookMs how long the audit took.
	KeyspaceKeys int64 `json:"keyspace_keys"`
	// Own counts the sorted sets under -tierset-prefix's namespace
	// (prefix:{…}): tierset's ladders and queue sets, whose scores its own
	// codec writes and whose lack of TTL is by design. They are left to
	// the damage check, not reported as findings.
	Own    int   `json:"tierset_sorted_sets"`
	TookMs int64 `json:"took_ms"`
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
	redisURL := fs.String("redis", "", "Redis: host:port, a redis:// or rediss:// `URL`, or comma-separated cluster seeds (default $TIERSET_REDIS_URL); required")
	pattern := fs.String("match", "*", "SCAN `pattern` of the sorted sets to audit")
	maxMember := fs.Int("max-member", 1024, "report members larger than this many `bytes`")
	prefix := fs.String("tierset-prefix", cache.DefaultPrefix, "tierset's key `prefix`: its own sorted sets (prefix:{…}) are skipped and its promotions checked for damage (\"\" audits every key and skips the damage check)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	examples := fs.Int("examples", 3, "list at most `N` examples of each finding per key, and N members of each run of equal scores")
	if err := fs.parse(args, e); err != nil {
		return err
	}
	if !redisGiven(*redisURL) {
		return usagef("-redis (or $TIERSET_REDIS_URL) is required: audit reads an existing Redis")
	}
	if *maxMember < 1 || *examples < 0 {
		return usagef("-max-member wants ≥ 1 and -examples ≥ 0")
	}
	if *prefix != "" {
		// the check cache.New makes, before the scan: a usage error
		// should not cost a walk of the whole keyspace first
		if err := keyname.Check(*prefix); err != nil {
			return usagef("-tierset-prefix: %v", err)
		}
	}
	be, err := connect(ctx, *redisURL, e)
	if err != nil {
		return err
	}
	defer be.close()
	own := ""
	if *prefix != "" {
		// every tierset key (promotions {p:…}, queues {q:…}, and whatever
		// else the library adds) sits in the prefix's hash-tag namespace
		own = *prefix + ":{"
	}
	start := time.Now()
	rep := auditReport{Pattern: wholeText(*pattern), Keys: []auditKey{}}
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
		if own != "" && strings.HasPrefix(key, own) {
			mu.Lock()
			rep.Own++
			mu.Unlock()
			return nil
		}
		k, err := auditOne(ctx, node, key, *maxMember, *examples)
		if errors.Is(err, errAuditGone) {
			return nil // no longer a sorted set: as if deleted before the SCAN saw it
		}
		if err != nil {
			return fmt.Errorf("key %s: %w", text.Quote(key), err)
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
		// By SCAN, not the index: a meta key the index lacks is audited too.
		ids, err := c.ScanIDs(ctx)
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
	sort.Slice(rep.Keys, func(i, j int) bool {
		a, b := rep.Keys[i].Key, rep.Keys[j].Key
		return a.s < b.s || a.s == b.s && a.n < b.n
	})
	for _, k := range rep.Keys {
		rep.Summary.NonInteger += b2i(k.NonInteger > 0)
		rep.Summary.Inexact += b2i(k.Inexact > 0)
		rep.Summary.Ties += b2i(k.TiesTotal > 0)
		rep.Summary.Large += b2i(k.LargeN > 0)
		rep.Summary.NoTTL += b2i(k.NoTTL)
	}
	rep.Summary.Damaged = len(rep.Damaged)
	if *prefix != "" {
		c, err := cache.New(be.client, cache.Options{Prefix: *prefix})
		if err != nil {
			return usagef("-tierset-prefix: %v", err)
		}
		if rep.Unindexed, err = c.Unindexed(ctx); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printAudit(e.stdout, &rep, len(seen), time.Duration(rep.TookMs)*time.Millisecond)
	}
	if len(rep.Keys) > 0 || len(rep.Damaged) > 0 || len(rep.Unindexed) > 0 {
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

// errAuditGone is auditOne's answer for a key that a write made another
// type after the SCAN listed it: a live server's churn, skipped like a
// key deleted meanwhile, not a failure of the whole audit.
var errAuditGone = errors.New("no longer a sorted set")

// auditErr is err, or errAuditGone for a WRONGTYPE reply.
func auditErr(err error) error {
	if err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE") {
		return errAuditGone
	}
	return err
}

// maxExact is 2^53: from there on a double skips integers, so a score
// at or beyond it may not be the integer written.
const maxExact = 1 << 53

// inexactScore reports a score no integer threshold should have: at or
// beyond ±2^53, or infinite.
func inexactScore(f float64) bool { return math.Abs(f) >= maxExact }

// auditOne reads one sorted set in slices of auditChunk, ascending.
func auditOne(ctx context.Context, node redis.Cmdable, key string, maxMember, examples int) (auditKey, error) {
	k := auditKey{Key: wholeText(key)} // whole: it is what an operator acts on
	pipe := node.Pipeline()
	card := pipe.ZCard(ctx, key)
	ttl := pipe.TTL(ctx, key)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return k, auditErr(err)
	}
	k.Members = card.Val()
	k.NoTTL = ttl.Val() == -1 // -2: gone since the SCAN
	// The run of equal scores in progress: its size, and its first members
	// while it may be listed. Its last member is prev: ZRANGE orders equal
	// scores by member bytes, so that is the greatest, the one a REV
	// BYSCORE LIMIT 0 1 answers. Nothing else of a run is kept, and a
	// member listed keeps at most auditCut bytes when over maxMember.
	var (
		have      bool
		prevScore float64
		prev      string
		runN      int
		runEx     []auditText
	)
	flush := func() {
		if runN > 1 {
			k.TiesTotal++
			if len(k.Ties) < examples {
				k.Ties = append(k.Ties, auditTie{Score: auditFloat(prevScore), Count: runN, Members: runEx, Wins: newAuditText(prev, maxMember)})
			}
		}
		runN, runEx = 0, nil
	}
	listed := func() bool { return len(k.Ties) < examples }
	for off := int64(0); off < k.Members; off += auditChunk {
		zs, err := node.ZRangeWithScores(ctx, key, off, off+auditChunk-1).Result()
		if err != nil {
			return k, auditErr(err)
		}
		for _, z := range zs {
			m, _ := z.Member.(string)
			if have && (z.Score < prevScore || z.Score == prevScore && m <= prev) {
				// Not after the last member read, in the set's order (by
				// score, then by member bytes): read again, because a
				// write between two slices moved it past the slice's end.
				// Counted once, and never a run of equal scores with itself.
				continue
			}
			if inexactScore(z.Score) {
				k.Inexact++
				if len(k.InexactExamples) < examples {
					k.InexactExamples = append(k.InexactExamples, auditScore{Member: newAuditText(m, maxMember), Score: auditFloat(z.Score)})
				}
			} else if z.Score != math.Trunc(z.Score) {
				k.NonInteger++
				if len(k.Examples) < examples {
					k.Examples = append(k.Examples, auditScore{Member: newAuditText(m, maxMember), Score: auditFloat(z.Score)})
				}
			}
			if len(m) > maxMember {
				k.LargeN++
				if len(k.Large) < examples {
					k.Large = append(k.Large, auditScore{Member: wholeText(strings.Clone(auditPrefix(m, auditCut))), Score: auditFloat(z.Score), Bytes: len(m)})
				}
			}
			if have && prevScore == z.Score {
				if runN == 0 {
					runN = 1
					if listed() {
						runEx = append(runEx, newAuditText(prev, maxMember))
					}
				}
				runN++
				if listed() && len(runEx) < examples {
					runEx = append(runEx, newAuditText(m, maxMember))
				}
			} else {
				flush()
			}
			have, prevScore, prev = true, z.Score, m
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
		fmt.Fprintf(w, "%s (%s)\n", k.Key.quote(), count(int(k.Members), "member", "members"))
		if k.Inexact > 0 {
			fmt.Fprintf(w, "  %s at or beyond ±2^53 or infinite (not exact integers):", count(k.Inexact, "score", "scores"))
			for _, x := range k.InexactExamples {
				fmt.Fprintf(w, " %s=%s", x.Member.quote(), x.Score)
			}
			fmt.Fprintln(w)
		}
		if k.NonInteger > 0 {
			fmt.Fprintf(w, "  %s with a fraction (money stored as a float?):", count(k.NonInteger, "score", "scores"))
			for _, x := range k.Examples {
				fmt.Fprintf(w, " %s=%s", x.Member.quote(), x.Score)
			}
			fmt.Fprintln(w)
		}
		for _, t := range k.Ties {
			fmt.Fprintf(w, "  equal scores %s (%s): %s; a REV BYSCORE LIMIT 0 1 answers %s today (the greatest member bytes)\n",
				t.Score, count(t.Count, "member", "members"), quoteMembers(t.Members, t.Count), t.Wins.quote())
		}
		if more := k.TiesTotal - len(k.Ties); more > 0 {
			fmt.Fprintf(w, "  … and %s of equal scores\n", count(more, "more run", "more runs"))
		}
		if k.LargeN > 0 {
			fmt.Fprintf(w, "  %s over the bound:", count(k.LargeN, "member", "members"))
			for _, x := range k.Large {
				// the auditCut bytes kept, whole: text.Quote would cut them again
				fmt.Fprintf(w, " %s… (%d bytes)", strconv.Quote(x.Member.s), x.Bytes)
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
	for _, id := range rep.Unindexed {
		fmt.Fprintf(w, "tierset promotion %s is not in the promotion index, so List skips it: run Cache.Reindex (docs/operations.md)\n", text.Quote(id))
	}
	s := rep.Summary
	fmt.Fprintf(w, "summary: %s matching %s; inexact scores in %d, non-integer scores in %d, equal scores in %d, large members in %d, no TTL on %d; %s; %s of tierset's own left to it\n",
		count(rep.SortedSets, "sorted set", "sorted sets"), rep.Pattern.quote(), s.Inexact, s.NonInteger, s.Ties, s.Large, s.NoTTL,
		count(s.Damaged, "damaged tierset promotion", "damaged tierset promotions"), count(rep.Own, "sorted set", "sorted sets"))
	fmt.Fprintf(w, "scanned a keyspace of %s (%s audited) in %v\n", count(int(rep.KeyspaceKeys), "key", "keys"),
		count(scanned, "sorted set", "sorted sets"), took.Round(time.Millisecond))
}

// quoteMembers is the members listed of a run of n, each Go-quoted (so
// bytes that are not UTF-8 read as \xff escapes, one text per member),
// with "…" when the run has more.
func quoteMembers(ms []auditText, n int) string {
	out := make([]string, len(ms), len(ms)+1)
	for i, m := range ms {
		out[i] = m.quote()
	}
	if n > len(ms) {
		out = append(out, "…")
	}
	return strings.Join(out, ", ")
}
