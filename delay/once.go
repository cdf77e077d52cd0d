package delay

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// reqIDs hands out the request IDs of one Queue: a random nonce, drawn
// once in New, followed by a counter. Two Queues (in one process or two)
// share a nonce with odds of 2^-48, and a counter step is one atomic add,
// so an ID costs nothing next to the round trip it names.
type reqIDs struct {
	nonce string
	n     atomic.Uint64
}

func newNonce() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// replyBucket is how many consecutive calls of a Queue keep their replies
// in one hash (reply.lua): few enough that it stays a listpack.
const replyBucket = 64

// next is a fresh request ID, one logical call however often it is sent:
// nonce:bucket:slot, whose last part is the call's field in the reply
// hash its first two name (reply.lua).
func (r *reqIDs) next() string {
	n := r.n.Add(1)
	return r.nonce + ":" + strconv.FormatUint(n/replyBucket, 36) + ":" + strconv.FormatUint(n%replyBucket, 36)
}

// part is the request ID of part k of a call that a library method splits
// into several scripts (AckMany, one script per MaxBatch leases).
func part(req string, k int) string {
	if k == 0 {
		return req
	}
	return req + "." + strconv.Itoa(k)
}

// onceKeys and onceArgs add what once (reply.lua) takes off the end of a
// mutating script's KEYS and ARGV: the reply key of req and how long the
// reply is kept. A re-send of the same command (go-redis retries, a
// pipeline resent after NOSCRIPT, the Worker's own re-sends with the same
// req) carries the same key, so it gets the first run's reply.
func (q *Queue) onceKeys(keys []string, req string) []string {
	return append(keys[:len(keys):len(keys)], q.k.reply(req))
}

func (q *Queue) onceArgs(args []any) []any {
	return append(args[:len(args):len(args)], q.keepMs)
}

// mutate runs the mutating script s as the call req (see onceKeys). A
// call refused by a slot migration is sent again for at most half of
// ReplyTTL, so that a first send that ran and lost its reply still has
// its reply kept when the last re-send arrives.
func (q *Queue) mutate(ctx context.Context, s *redis.Script, op, req string, keys []string, args ...any) (reply, error) {
	return runFor(ctx, q.c, s, op, q.migrationWait(), q.onceKeys(keys, req), q.onceArgs(args)...)
}

func (q *Queue) migrationWait() time.Duration { return min(migrationWait, q.o.ReplyTTL/2) }
