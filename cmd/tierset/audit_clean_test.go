package main_test

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delaytest"
	"github.com/tierset/tierset/internal/testredis"
)

// TestAuditInexactScores: scores no integer threshold can be are found,
// one line each: beyond ±2^53 (9007199254740993 is stored as …992),
// 1e300, and both infinities; 2^53-1 and -(2^53-1) are exact and pass.
func TestAuditInexactScores(t *testing.T) {
	t.Parallel()
	eachServer(t, func(t *testing.T, s *server) {
		for _, c := range []struct {
			name    string
			score   float64
			inexact bool
		}{
			{"max-exact", 1<<53 - 1, false},
			{"min-exact", -(1<<53 - 1), false},
			{"two53", 1 << 53, true},
			{"two53plus1", 9007199254740993, true},
			{"neg-two53", -(1 << 53), true},
			{"huge", 1e300, true},
			{"inf", math.Inf(1), true},
			{"neginf", math.Inf(-1), true},
		} {
			t.Run(c.name, func(t *testing.T) {
				key := s.prefix + ":inexact:" + c.name
				zadd(t, s, key, redis.Z{Score: c.score, Member: "tier"})
				if err := s.client.Expire(t.Context(), key, time.Hour).Err(); err != nil { // a TTL, so only the score can be a finding
					t.Fatal(err)
				}
				args := []string{"audit", "-redis", s.url, "-match", key, "-tierset-prefix", ""}
				r := tierset(t, append(args, "-json")...)
				if !c.inexact {
					r.expect(t, 0)
					if !strings.Contains(r.stdout, `"keys_with_inexact_scores": 0`) {
						t.Errorf("score %v reported:\n%s", c.score, r.stdout)
					}
					return
				}
				r.expect(t, 1)
				if !strings.Contains(r.stdout, `"inexact_scores": 1`) || !strings.Contains(r.stdout, `"keys_with_inexact_scores": 1`) {
					t.Errorf("score %v not reported as inexact:\n%s", c.score, r.stdout)
				}
				r = tierset(t, args...)
				r.expect(t, 1)
				if !strings.Contains(r.stdout, "1 score at or beyond ±2^53 or infinite (not exact integers): \"tier\"=") ||
					!strings.Contains(r.stdout, "inexact scores in 1,") {
					t.Errorf("text report for %v:\n%s", c.score, r.stdout)
				}
			})
		}
	})
}

// TestAuditCleanDeployment: a deployment holding only tierset's own keys
// (promotions, and a queue with pending, dead and finished tasks) audits
// clean with exit 0; the queue's sets once made audit exit 1 (no TTL,
// equal scores). The same keys audited with -tierset-prefix "" are
// reported, so the skip is by the layout, not by accident.
func TestAuditCleanDeployment(t *testing.T) {
	t.Parallel()
	b := testredis.Redis(t) // skips without a real server
	url := testredis.URL()
	prefix := b.Prefix
	rulesFile, err := filepath.Abs("../../examples/rules.json")
	if err != nil {
		t.Fatal(err)
	}
	r := tierset(t, "warm", "-redis", url, "-prefix", prefix, "-rules", rulesFile)
	r.expect(t, 0)
	var q *delay.Queue
	q, err = delay.New(b.Client, "orders", delay.Options{Prefix: prefix, DoneTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 20)
	for i := range keys {
		keys[i] = fmt.Sprintf("order-%d", i)
	}
	delaytest.HandleAll(t, t.Context(), q, keys, 5, "card declined", 30*time.Second)
	for i := range 3 { // pending, not due: an hour out
		if _, err := q.Enqueue(t.Context(), delay.Job{Key: fmt.Sprintf("later-%d", i), When: delay.After(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	r = tierset(t, "audit", "-redis", url, "-match", prefix+"*", "-tierset-prefix", prefix)
	r.expect(t, 0)
	if !strings.Contains(r.stdout, "summary: 0 sorted sets matching") || strings.Contains(r.stdout, "0 sorted sets of tierset's own") {
		t.Errorf("a clean deployment's report:\n%s", r.stdout)
	}
	r = tierset(t, "audit", "-redis", url, "-match", prefix+"*", "-tierset-prefix", "")
	r.expect(t, 1)
	if !strings.Contains(r.stdout, "no TTL") {
		t.Errorf("with the layout check off, tierset's sets should be audited like any other:\n%s", r.stdout)
	}
}
