package main_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/testredis"
)

// auditJSON is the part of audit's -json report these tests read; keys
// and members stay raw, for auditBytes.
type auditJSON struct {
	Keys []struct {
		Key     json.RawMessage `json:"key"`
		Members int64           `json:"members"`
		Ties    []struct {
			Score   json.RawMessage   `json:"score"`
			Count   int               `json:"count"`
			Members []json.RawMessage `json:"members"`
			Wins    json.RawMessage   `json:"wins_today"`
		} `json:"equal_scores"`
		Runs  int `json:"equal_score_runs"`
		Large []struct {
			Member json.RawMessage `json:"member"`
			Bytes  int             `json:"bytes"`
		} `json:"large_members"`
	} `json:"keys"`
}

func parseAudit(t *testing.T, out string) auditJSON {
	t.Helper()
	var rep auditJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("-json: %v\n%.2000s", err, out)
	}
	return rep
}

// auditBytes reads a key or member as audit's JSON documents it: a
// string, or {"base64": ...} for bytes that are not UTF-8.
func auditBytes(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	var b struct {
		Base64 *string `json:"base64"`
	}
	if err := json.Unmarshal(raw, &b); err != nil || b.Base64 == nil {
		t.Fatalf("%s: neither a string nor {\"base64\": ...}", raw)
	}
	v, err := base64.StdEncoding.DecodeString(*b.Base64)
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return string(v)
}

func zadd(t *testing.T, s *server, key string, zs ...redis.Z) {
	t.Helper()
	if err := s.client.ZAdd(t.Context(), key, zs...).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestAuditInfAndBinary: equal scores at ±inf print (JSON "+inf" and
// "-inf", text +inf, -inf) instead of losing the report, and members and
// keys that are not UTF-8 print distinctly and reversibly: in JSON as
// {"base64": ...} of their bytes, in text Go-quoted (\xff).
func TestAuditInfAndBinary(t *testing.T) {
	t.Parallel()
	type tie struct {
		score   string // as JSON has it
		count   int
		members string // Go-quoted, comma-separated
		wins    string
	}
	eachServer(t, func(t *testing.T, s *server) {
		for _, c := range []struct {
			name, key string
			zs        []redis.Z
			ties      []tie
			large     string // the large member's 64 bytes kept, if any
			text      []string
		}{
			{
				name: "inf", key: s.prefix + ":inf",
				zs: []redis.Z{{Score: math.Inf(1), Member: "a"}, {Score: math.Inf(1), Member: "b"},
					{Score: math.Inf(-1), Member: "c"}, {Score: math.Inf(-1), Member: "d"}, {Score: 1, Member: "e"}},
				ties: []tie{{`"-inf"`, 2, `"c","d"`, "d"}, {`"+inf"`, 2, `"a","b"`, "b"}},
				text: []string{
					`equal scores +inf (2 members): "a", "b"; a REV BYSCORE LIMIT 0 1 answers "b" today`,
					`equal scores -inf (2 members): "c", "d"; a REV BYSCORE LIMIT 0 1 answers "d" today`,
				},
			},
			{
				name: "binary", key: s.prefix + ":binary\xff",
				zs: []redis.Z{{Score: 5, Member: "\xff\x01"}, {Score: 5, Member: "\xfe\x01"},
					{Score: 6, Member: strings.Repeat("\xfe", 70)}},
				ties:  []tie{{"5", 2, `"\xfe\x01","\xff\x01"`, "\xff\x01"}},
				large: strings.Repeat("\xfe", 64),
				text: []string{
					`equal scores 5 (2 members): "\xfe\x01", "\xff\x01"; a REV BYSCORE LIMIT 0 1 answers "\xff\x01" today`,
					`1 member over the bound: "` + strings.Repeat(`\xfe`, 64) + `"… (70 bytes)`,
				},
			},
		} {
			t.Run(c.name, func(t *testing.T) {
				zadd(t, s, c.key, c.zs...)
				// a glob, not the key: miniredis's SCAN panics on a MATCH that is not UTF-8
				args := []string{"audit", "-redis", s.url, "-match", s.prefix + ":" + c.name + "*", "-tierset-prefix", "", "-max-member", "64"}
				r := tierset(t, append(args, "-json")...)
				r.expect(t, 1)
				rep := parseAudit(t, r.stdout)
				if len(rep.Keys) != 1 || auditBytes(t, rep.Keys[0].Key) != c.key {
					t.Fatalf("want the one key %q:\n%s", c.key, r.stdout)
				}
				k := rep.Keys[0]
				var got []tie
				for _, x := range k.Ties {
					var ms []string
					for _, m := range x.Members {
						ms = append(ms, fmt.Sprintf("%q", auditBytes(t, m)))
					}
					got = append(got, tie{string(x.Score), x.Count, strings.Join(ms, ","), auditBytes(t, x.Wins)})
				}
				if fmt.Sprint(got) != fmt.Sprint(c.ties) {
					t.Errorf("ties %#v, want %#v", got, c.ties)
				}
				if c.large != "" && (len(k.Large) != 1 || auditBytes(t, k.Large[0].Member) != c.large || k.Large[0].Bytes != 70) {
					t.Errorf("large members %s", r.stdout)
				}
				r = tierset(t, args...)
				r.expect(t, 1)
				for _, want := range c.text {
					if !strings.Contains(r.stdout, want) {
						t.Errorf("text report lacks %s:\n%s", want, r.stdout)
					}
				}
			})
		}
	})
}

// TestAuditBigRun: a run of 50,000 equal scores is reported by its count
// and at most -examples members, so the report stays small (it once
// listed every member: 27.6 MB for 400k).
func TestAuditBigRun(t *testing.T) {
	t.Parallel()
	const n = 50_000
	b := testredis.Redis(t) // skips without a real server; miniredis sorts the whole set per ZRANGE slice
	s := &server{url: testredis.URL(), client: b.Client, prefix: b.Prefix}
	key := s.prefix + ":run"
	pipe := s.client.Pipeline()
	for from := 0; from < n; from += 5000 {
		zs := make([]redis.Z, 5000)
		for i := range zs {
			zs[i] = redis.Z{Score: 7, Member: fmt.Sprintf("m%06d", from+i)}
		}
		pipe.ZAdd(t.Context(), key, zs...)
	}
	if _, err := pipe.Exec(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		examples string
		members  []string
	}{
		{"3", []string{"m000000", "m000001", "m000002"}},
		{"0", nil},
	} {
		r := tierset(t, "audit", "-redis", s.url, "-match", key, "-tierset-prefix", "", "-examples", c.examples, "-json")
		r.expect(t, 1)
		if len(r.stdout) > 2048 {
			t.Errorf("-examples %s: a %d-byte report for one run", c.examples, len(r.stdout))
		}
		rep := parseAudit(t, r.stdout)
		if len(rep.Keys) != 1 || rep.Keys[0].Members != n || rep.Keys[0].Runs != 1 {
			t.Fatalf("-examples %s: %.2000s", c.examples, r.stdout)
		}
		var got []string
		for _, x := range rep.Keys[0].Ties {
			if x.Count != n || auditBytes(t, x.Wins) != fmt.Sprintf("m%06d", n-1) {
				t.Errorf("-examples %s: count %d wins %s; want %d, the last member", c.examples, x.Count, x.Wins, n)
			}
			for _, m := range x.Members {
				got = append(got, auditBytes(t, m))
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(c.members) {
			t.Errorf("-examples %s: members listed %v, want %v", c.examples, got, c.members)
		}
		r = tierset(t, "audit", "-redis", s.url, "-match", key, "-tierset-prefix", "", "-examples", c.examples)
		r.expect(t, 1)
		if len(r.stdout) > 2048 || (c.examples != "0" && !strings.Contains(r.stdout, `(50000 members): "m000000", "m000001", "m000002", …;`)) {
			t.Errorf("-examples %s: text report of %d bytes:\n%.2000s", c.examples, len(r.stdout), r.stdout)
		}
	}
}

// TestAuditLongNames: keys and members are printed whole up to
// -max-member bytes, so two that differ only past the 40th byte print
// distinctly in the text report (it once cut every one at 40 bytes); one
// over the bound is given by its first 64 bytes and its size, in text and
// in JSON ({"prefix": ...} or {"prefix_base64": ...}, and "bytes"), so a
// run of equal scores whose members are megabytes makes a report of a
// few kilobytes (the JSON report once held them whole).
func TestAuditLongNames(t *testing.T) {
	t.Parallel()
	eachServer(t, func(t *testing.T, s *server) {
		long := s.prefix + ":long:" + strings.Repeat("-", 48)
		k1, k2 := long+"1", long+"2"
		m1, m2 := "order:"+strings.Repeat("0", 48)+"1", "order:"+strings.Repeat("0", 48)+"2"
		zadd(t, s, k1, redis.Z{Score: 1, Member: m1}, redis.Z{Score: 1, Member: m2})
		zadd(t, s, k2, redis.Z{Score: 1.5, Member: m1})
		const huge = 1 << 20
		hugeKey := s.prefix + ":long:huge"
		a, b := strings.Repeat("a", huge), strings.Repeat("\xff", huge)
		zadd(t, s, hugeKey, redis.Z{Score: 2, Member: a}, redis.Z{Score: 2, Member: b})
		args := []string{"audit", "-redis", s.url, "-match", s.prefix + ":long:*", "-tierset-prefix", ""}

		r := tierset(t, args...)
		r.expect(t, 1)
		for _, want := range []string{
			fmt.Sprintf("%q (2 members)\n", k1),
			fmt.Sprintf("%q (1 member)\n", k2),
			fmt.Sprintf("equal scores 1 (2 members): %q, %q; a REV BYSCORE LIMIT 0 1 answers %q today", m1, m2, m2),
			fmt.Sprintf("%q=1.5", m1),
			fmt.Sprintf("equal scores 2 (2 members): %q… (%d bytes), %q… (%d bytes); a REV BYSCORE LIMIT 0 1 answers %q… (%d bytes) today",
				a[:64], huge, b[:64], huge, b[:64], huge),
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("text report lacks %s:\n%.3000s", want, r.stdout)
			}
		}
		if len(r.stdout) > 4096 {
			t.Errorf("a text report of %d bytes", len(r.stdout))
		}

		r = tierset(t, append(args, "-json")...)
		r.expect(t, 1)
		if len(r.stdout) > 4096 {
			t.Fatalf("a JSON report of %d bytes for members of %d:\n%.3000s", len(r.stdout), huge, r.stdout)
		}
		rep := parseAudit(t, r.stdout)
		if len(rep.Keys) != 3 {
			t.Fatalf("want 3 keys:\n%s", r.stdout)
		}
		byKey := map[string]int{}
		for i, k := range rep.Keys {
			byKey[auditBytes(t, k.Key)] = i
		}
		if i, ok := byKey[k1]; !ok || len(rep.Keys[i].Ties) != 1 ||
			auditBytes(t, rep.Keys[i].Ties[0].Members[0]) != m1 || auditBytes(t, rep.Keys[i].Ties[0].Wins) != m2 {
			t.Errorf("%s: %s", k1, r.stdout)
		}
		i, ok := byKey[hugeKey]
		if !ok || len(rep.Keys[i].Ties) != 1 || len(rep.Keys[i].Ties[0].Members) != 2 {
			t.Fatalf("%s: %s", hugeKey, r.stdout)
		}
		tie := rep.Keys[i].Ties[0]
		for _, c := range []struct {
			raw  json.RawMessage
			want string
		}{
			{tie.Members[0], fmt.Sprintf(`{"prefix":%q,"bytes":%d}`, a[:64], huge)},
			{tie.Members[1], fmt.Sprintf(`{"prefix_base64":%q,"bytes":%d}`, base64.StdEncoding.EncodeToString([]byte(b[:64])), huge)},
			{tie.Wins, fmt.Sprintf(`{"prefix_base64":%q,"bytes":%d}`, base64.StdEncoding.EncodeToString([]byte(b[:64])), huge)},
		} {
			var got bytes.Buffer
			if err := json.Compact(&got, c.raw); err != nil || got.String() != c.want {
				t.Errorf("member over the bound: %s, want %s", c.raw, c.want)
			}
		}
	})
}

// TestAuditPatternBytes: a -match pattern that is not UTF-8 is printed
// back as the bytes it was, like a key: {"base64": ...} in JSON (it was
// a string with U+FFFD in place of the byte) and Go-quoted in text.
func TestAuditPatternBytes(t *testing.T) {
	t.Parallel()
	b := testredis.Redis(t) // skips without a real server; miniredis's SCAN panics on a MATCH that is not UTF-8
	s := &server{url: testredis.URL(), client: b.Client, prefix: b.Prefix}
	pattern := s.prefix + ":\xff*"
	zadd(t, s, s.prefix+":\xffa", redis.Z{Score: 1, Member: "a"}, redis.Z{Score: 1, Member: "b"})
	r := tierset(t, "audit", "-redis", s.url, "-match", pattern, "-tierset-prefix", "", "-json")
	r.expect(t, 1)
	var rep struct {
		Pattern json.RawMessage `json:"pattern"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("-json: %v\n%s", err, r.stdout)
	}
	if got := auditBytes(t, rep.Pattern); got != pattern {
		t.Errorf("pattern %s, want the bytes %q", rep.Pattern, pattern)
	}
	r = tierset(t, "audit", "-redis", s.url, "-match", pattern, "-tierset-prefix", "")
	r.expect(t, 1)
	if want := fmt.Sprintf("summary: 1 sorted set matching %q;", pattern); !strings.Contains(r.stdout, want) {
		t.Errorf("text report lacks %s:\n%s", want, r.stdout)
	}
}

// TestAuditUsageFirst: a flag audit refuses is a usage error (exit 2)
// before it connects, so a bad -tierset-prefix does not cost a walk of
// the whole keyspace first (it was checked after the scan). The address
// is closed: reaching for the server would be exit 1.
func TestAuditUsageFirst(t *testing.T) {
	t.Parallel()
	addr := testredis.ClosedAddr(t)
	for _, args := range [][]string{
		{"-tierset-prefix", "a{b"},
		{"-tierset-prefix", "a b"},
		{"-tierset-prefix", "a\xff"},
		{"-max-member", "0"},
		{"-examples", "-1"},
	} {
		r := tierset(t, append([]string{"audit", "-redis", addr, "-json"}, args...)...)
		if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, args[0]) {
			t.Errorf("audit %q: exit %d, stdout %q, stderr %q; want 2 naming %s, nothing on stdout", args, r.code, r.stdout, r.stderr, args[0])
		}
	}
}
