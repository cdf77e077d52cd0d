package measure_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/internal/measure"
	"github.com/tierset/tierset/internal/testredis"
)

func TestQuantile(t *testing.T) {
	t.Parallel()
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{nil, 0.5, 0},
		{ms(7), 0.99, 7 * time.Millisecond},
		{ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond}, // nearest rank: ceil(0.5*4) = 2nd
		{ms(1, 2, 3, 4), 0.51, 3 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.99, 10 * time.Millisecond},
		{ms(1, 2, 3), 0, time.Millisecond},
		{ms(1, 2, 3), 1, 3 * time.Millisecond},
	}
	for _, tc := range tests {
		if got := measure.Quantile(tc.sorted, tc.q); got != tc.want {
			t.Errorf("Quantile(%v, %v) = %v, want %v", tc.sorted, tc.q, got, tc.want)
		}
	}
	var s measure.Samples
	for _, d := range ms(5, 1, 3) {
		s.Add(d)
	}
	if got := s.Summary(); got.N != 3 || got.Min != time.Millisecond || got.P50 != 3*time.Millisecond || got.Max != 5*time.Millisecond {
		t.Errorf("Summary = %+v", got)
	}
}

// TestFloorsFailures: only robust floors fail a run; under strict a robust
// floor that was skipped fails it too; tight and not-judged rows never do.
func TestFloorsFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		add          func(f *measure.Floors)
		lax, strict  int
		wantStatuses []measure.Status
	}{
		{"robust pass", func(f *measure.Floors) { f.Judge(measure.Floor{Kind: measure.Robust}, true) }, 0, 0, []measure.Status{measure.Pass}},
		{"robust fail", func(f *measure.Floors) { f.Judge(measure.Floor{Kind: measure.Robust}, false) }, 1, 1, []measure.Status{measure.Fail}},
		{"tight missed", func(f *measure.Floors) { f.Judge(measure.Floor{Kind: measure.Tight}, false) }, 0, 0, []measure.Status{measure.Missed}},
		{"tight met", func(f *measure.Floors) { f.Judge(measure.Floor{Kind: measure.Tight}, true) }, 0, 0, []measure.Status{measure.Met}},
		{"robust skipped", func(f *measure.Floors) { f.Skip(measure.Floor{Kind: measure.Robust}, "no 3000 tiers") }, 0, 1, []measure.Status{measure.Skipped}},
		{"robust not judged", func(f *measure.Floors) {
			f.JudgeIf(false, measure.NotRedis, measure.Floor{Kind: measure.Robust}, false)
		}, 0, 0, []measure.Status{measure.NotJudged}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var f measure.Floors
			tc.add(&f)
			if got := len(f.Failures(false)); got != tc.lax {
				t.Errorf("Failures(false) = %d, want %d", got, tc.lax)
			}
			if got := len(f.Failures(true)); got != tc.strict {
				t.Errorf("Failures(true) = %d, want %d", got, tc.strict)
			}
			for i, r := range f.Rows {
				if r.Status != tc.wantStatuses[i] {
					t.Errorf("row %d: %s, want %s", i, r.Status, tc.wantStatuses[i])
				}
			}
			var b strings.Builder
			if err := f.WriteJSON(&b); err != nil {
				t.Fatal(err)
			}
			back, err := measure.ReadJSON([]byte(b.String()))
			if err != nil || len(back) != len(f.Rows) || back[0] != f.Rows[0] {
				t.Fatalf("JSON round trip: %+v %v, want %+v", back, err, f.Rows)
			}
		})
	}
}

// TestKeysMemoryDelete: the key helpers see exactly the keys under a
// pattern on every backend, memory is reported by real servers only, and
// the byte counter sees a reply's bytes.
func TestKeysMemoryDelete(t *testing.T) {
	testredis.Each(t, func(t *testing.T, b *testredis.Backend) {
		ctx := context.Background()
		const n = 2500 // several SCAN pages
		pipe := b.Client.Pipeline()
		for i := range n {
			pipe.Set(ctx, fmt.Sprintf("%s:{k%d}:x", b.Prefix, i), strings.Repeat("v", 100), 0)
		}
		pipe.Set(ctx, b.Prefix+"-other:x", "v", 0)
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		keys, err := measure.Keys(ctx, b.Client, b.Prefix+":*")
		if err != nil || len(keys) != n {
			t.Fatalf("Keys: %d, %v; want %d", len(keys), err, n)
		}
		total, count, ok, err := measure.KeysMemory(ctx, b.Client, b.Prefix+":*")
		if err != nil {
			t.Fatal(err)
		}
		used, usedOK, err := measure.UsedMemory(ctx, b.Client)
		if err != nil {
			t.Fatal(err)
		}
		if b.Real() && (!ok || count != n || total < n*100 || !usedOK || used <= 0) {
			t.Errorf("real server: MEMORY USAGE %d B over %d keys (ok %v), used_memory %d (ok %v)", total, count, ok, used, usedOK)
		}
		if !b.Real() && usedOK {
			t.Errorf("miniredis reported used_memory %d", used)
		}
		del, err := measure.DeleteKeys(ctx, b.Client, b.Prefix+":*")
		if err != nil || del != n {
			t.Fatalf("DeleteKeys: %d, %v; want %d", del, err, n)
		}
		if left, _ := measure.Keys(ctx, b.Client, b.Prefix+"*"); len(left) != 1 {
			t.Fatalf("left %v, want only the other prefix's key", left)
		}

		var bc measure.ByteCounter
		c, err := measure.ClientLike(b.Client, bc.Dialer)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		key := b.Prefix + ":{big}"
		if err := b.Client.Set(ctx, key, strings.Repeat("x", 5000), 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.Ping(ctx).Err(); err != nil { // the handshake is read too
			t.Fatal(err)
		}
		before := bc.Read()
		if _, err := c.Get(ctx, key).Result(); err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		if got := bc.Read() - before; got < 5000 || got > 5100 {
			t.Errorf("GET of 5000 bytes read %d bytes", got)
		}
	})
}
