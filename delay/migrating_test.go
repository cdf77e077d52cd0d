package delay

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisErr is an error reply as go-redis returns one.
type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}

// scripted answers EVALSHA with the replies in order (the last one again
// once they run out) and records what each send carried.
type scripted struct {
	redis.Scripter
	replies []error
	sends   [][]any
}

func (s *scripted) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	s.sends = append(s.sends, append([]any{keys}, args...))
	cmd := redis.NewCmd(ctx)
	err := s.replies[min(len(s.sends), len(s.replies))-1]
	if err != nil {
		cmd.SetErr(err)
	} else {
		cmd.SetVal([]any{int64(1)})
	}
	return cmd
}

// A call refused because its slot is migrating is sent again, unchanged,
// until it runs or its wait is over; any other error returns at once.
func TestRunResendsWhileSlotMigrates(t *testing.T) {
	t.Parallel()
	tryAgain := redisErr("TRYAGAIN Multiple keys request during rehashing of slot")
	ask := redisErr("ASK 11972 127.0.0.1:7001")
	cases := []struct {
		name    string
		replies []error
		wait    time.Duration
		sends   int // at least
		ok      bool
	}{
		{"refused, then runs", []error{tryAgain, ask, redisErr("MOVED 11972 127.0.0.1:7002"), nil}, time.Minute, 4, true},
		{"refused past its wait", []error{tryAgain}, 50 * time.Millisecond, 2, false},
		{"another error", []error{redisErr("ERR something else"), nil}, time.Minute, 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &scripted{replies: tc.replies}
			r, err := runFor(testCtx(t), c, scriptStats, "test", tc.wait, []string{"{q:a}:due"}, "x", 7)
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrRedis)) {
				t.Fatalf("runFor: %v %v, want ok=%v or an ErrRedis", r, err, tc.ok)
			}
			if len(c.sends) < tc.sends || (!tc.ok && tc.sends == 1 && len(c.sends) != 1) {
				t.Fatalf("%d sends, want %d", len(c.sends), tc.sends)
			}
			for i, s := range c.sends {
				if !reflect.DeepEqual(s, c.sends[0]) {
					t.Fatalf("send %d carried %v, the first %v: not the same call", i, s, c.sends[0])
				}
			}
		})
	}
}
