package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// floorScript is the floor way's script: per request the record, the hold
// and the count Reserve would write for a new order, with the same field
// names, values of the same sizes and Redis TIME, and nothing read.
//
// KEYS[1] -> base name (records are base .. 'o:' .. order)
// KEYS[2] -> holds (ZSET order -> expiry ms)
// KEYS[3] -> counter (HASH, field 'u')
// ARGV[i] -> one request each: order, req, hold ms and token, each
// followed by a tab
// Returns the expiry ms of each request, in order.
var floorScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local nows = string.format('%d', now)
local zadd, out = {}, {}
for j = 1, #ARGV do
  local o, q, h, tok = string.match(ARGV[j], '^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t$')
  local exp = now + tonumber(h)
  local exps = string.format('%d', exp)
  redis.call('HSET', KEYS[1] .. 'o:' .. o, 'st', 'h', 'req', q, 'exp', exps, 'd', 'c:summer\tu\t1\n', 'at', nows, 'n', tok)
  zadd[#zadd + 1] = exps
  zadd[#zadd + 1] = o
  out[j] = exp
end
redis.call('HINCRBY', KEYS[3], 'u', #ARGV)
redis.call('ZADD', KEYS[2], unpack(zadd))
return out
`)

// floorBatcher sends queued requests as one floorScript call, up to
// floorInFlight calls at a time: a request made while fewer fly goes at
// once, alone, and the ones made meanwhile go together in the next, as
// budget.Reserve batches (up to its MaxBatch default, 64: never more
// here, with 64 clients).
type floorBatcher struct {
	rdb      *redis.Client
	keys     []string
	mu       sync.Mutex
	queue    []*floorReq
	inFlight int
}

// floorInFlight is 2, not Reserve's 1: a floor takes the fastest policy.
// With 1 to 4 calls in flight, at 64 clients, two runs each on a quiet
// 2-core machine, 2 gave the lowest p99 (docs/benchmarks.md, "The writes
// alone").
const floorInFlight = 2

type floorReq struct {
	arg  string
	done chan struct{}
	err  error
}

func (b *floorBatcher) grant(ctx context.Context, order string) error {
	// The request Reserve sends for this bench's line: the same req
	// encoding and a token of 16 hex digits.
	r := &floorReq{arg: order + "\t{\"l\":[{\"p\":\"summer\",\"u\":1}]}\t3600000\t" + fmt.Sprintf("%016x", len(order)) + "\t", done: make(chan struct{})}
	b.mu.Lock()
	if b.inFlight == floorInFlight {
		b.queue = append(b.queue, r)
		b.mu.Unlock()
		<-r.done
		return r.err
	}
	b.inFlight++
	b.mu.Unlock()
	r.err = b.send(ctx, []*floorReq{r})
	b.mu.Lock()
	if len(b.queue) > 0 {
		go b.flush(context.WithoutCancel(ctx)) // keeps its place in flight
	} else {
		b.inFlight--
	}
	b.mu.Unlock()
	return r.err
}

func (b *floorBatcher) flush(ctx context.Context) {
	for {
		b.mu.Lock()
		q := b.queue
		b.queue = nil
		if len(q) == 0 {
			b.inFlight--
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		err := b.send(ctx, q)
		for _, r := range q {
			r.err = err
			close(r.done)
		}
	}
}

func (b *floorBatcher) send(ctx context.Context, rs []*floorReq) error {
	args := make([]any, len(rs))
	for i, r := range rs {
		args[i] = r.arg
	}
	out, err := floorScript.Run(ctx, b.rdb, b.keys, args...).Int64Slice()
	if err == nil && len(out) != len(rs) {
		err = fmt.Errorf("floor script answered %d expiries for %d requests", len(out), len(rs))
	}
	return err
}

func floorWay(rdb *redis.Client, prefix string) *way {
	var b *floorBatcher
	var gen atomic.Int64
	return &way{
		name: "floor",
		grant: func(ctx context.Context, i int64) (bool, error) {
			return true, b.grant(ctx, "o"+strconv.FormatInt(i, 10))
		},
		used: func(ctx context.Context) (int64, error) {
			return b.rdb.HGet(ctx, b.keys[2], "u").Int64()
		},
		reset: func(ctx context.Context, _ int64) error {
			base := fmt.Sprintf("%s:{b:floor%d}:", prefix, gen.Add(1))
			b = &floorBatcher{rdb: rdb, keys: []string{base, base + "holds", base + "c:summer"}}
			return floorScript.Load(ctx, rdb).Err()
		},
	}
}
