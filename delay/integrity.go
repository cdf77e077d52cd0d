package delay

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// RepairResult reports what Repair found and did.
type RepairResult struct {
	Records int   // task records read
	TopID   int64 // the highest task ID number met (records and sets)
	// CounterRaised: the ID counter was gone or behind TopID and now is TopID.
	CounterRaised bool
	// IndexRebuilt: the index was gone and was rebuilt from the records.
	IndexRebuilt bool
	// Orphans counts records in no set (pending, in flight, dead, done):
	// their due entry was lost. They are left as they are: enqueueing
	// their (Key, Token) again, which Reconcile does, puts each back in due.
	Orphans int
	// RepliesFiled counts kept-reply hashes missing from the reply index
	// (so never swept), filed again to end a ReplyTTL from now.
	RepliesFiled int
}

// Repair puts back what the queue needs to never reuse an ID or miss a
// duplicate after Redis lost some of its keys (eviction, a stray DEL): it
// raises the ID counter past every ID found in the records and the sets,
// and rebuilds the key index when it is gone. Enqueue calls it by itself
// when a script refuses with ErrCounterLost or ErrIndexLost, then sends the
// job again. It reads every record of the queue (SCAN of its buckets on the
// queue's node, then HGETALL per bucket) and every member of its sets: it
// costs O(tasks) once, on a path that only a loss takes. What it changed
// goes to Observer.OnLoss and Stats (CounterLost, IndexLost). It also
// files kept-reply hashes that the reply index lost again (RepliesFiled,
// Observer.OnWarning), so that they are swept.
func (q *Queue) Repair(ctx context.Context) (RepairResult, error) {
	var res RepairResult
	node, err := q.node(ctx)
	if err != nil {
		return res, err
	}
	var top int64
	seen := func(id string) {
		if n, err := strconv.ParseInt(id, 36, 64); err == nil && n > top {
			top = n
		}
	}
	inSet := map[string]bool{}
	for _, z := range []string{q.k.due, q.k.inflight, q.k.dead, q.k.done} {
		if err := scanAll(ctx, func(cur uint64) *redis.ScanCmd { return node.ZScan(ctx, z, cur, "", 1000) }, func(kv []string) {
			for i := 0; i < len(kv); i += 2 {
				seen(kv[i])
				inSet[kv[i]] = true
			}
		}); err != nil {
			return res, wrapErr(ctx, "repair: scan sets", err)
		}
	}
	var buckets []string
	pattern := globEscape(q.k.tasks) + ":*"
	if err := scanAll(ctx, func(cur uint64) *redis.ScanCmd { return node.Scan(ctx, cur, pattern, 1000) }, func(ks []string) {
		buckets = append(buckets, ks...)
	}); err != nil {
		return res, wrapErr(ctx, "repair: scan buckets", err)
	}
	type task struct {
		n  int64
		id string
	}
	entries := map[string][]task{}
	for start := 0; start < len(buckets); start += 100 {
		part := buckets[start:min(start+100, len(buckets))]
		pipe := node.Pipeline()
		cmds := make([]*redis.MapStringStringCmd, len(part))
		for i, b := range part {
			cmds[i] = pipe.HGetAll(ctx, b)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return res, wrapErr(ctx, "repair: records", err)
		}
		for _, c := range cmds {
			for id, blob := range c.Val() {
				res.Records++
				seen(id)
				if !inSet[id] && !(len(blob) > 0 && (blob[0]-'0')&flagDone != 0) {
					res.Orphans++
				}
				// the digest sits at a fixed place; an unreadable record
				// keeps its ID in the entry, as enqueue keeps it
				if len(blob) > digestLen && isDigest(blob[1:1+digestLen]) {
					n, _ := strconv.ParseInt(id, 36, 64)
					dg := blob[1 : 1+digestLen]
					entries[dg] = append(entries[dg], task{n, id})
				}
			}
		}
	}
	res.TopID = top
	if res.RepliesFiled, err = q.fileReplies(ctx, node); err != nil {
		return res, err
	}
	rebuild, err := node.Exists(ctx, q.k.idx).Result()
	if err != nil {
		return res, wrapErr(ctx, "repair: index", err)
	}
	args := []any{strconv.FormatInt(top, 10), "0", 0}
	if rebuild == 0 {
		args[1], args[2] = "1", len(entries)
		for dg, ts := range entries {
			slices.SortFunc(ts, func(a, b task) int { return int(a.n - b.n) })
			ids := make([]string, len(ts))
			for i, t := range ts {
				ids[i] = t.id
			}
			args = append(args, dg, strings.Join(ids, ","))
		}
	}
	r, err := q.mutate(ctx, scriptRepair, "repair", q.req.next(), []string{q.k.ctr, q.k.idx, q.k.stats}, args...)
	if err != nil {
		return res, err
	}
	res.CounterRaised, res.IndexRebuilt = r.int(1) == 1, r.int(2) == 1
	if res.CounterRaised {
		q.o.obs.OnLoss(q.name, fmt.Errorf("%w: raised to %d", ErrCounterLost, top), 1)
	}
	if res.IndexRebuilt {
		q.o.obs.OnLoss(q.name, fmt.Errorf("%w: rebuilt from %d records", ErrIndexLost, res.Records), 1)
	}
	if res.Orphans > 0 {
		q.o.obs.OnLoss(q.name, fmt.Errorf("%w: %d records in no set", ErrDueLost, res.Orphans), res.Orphans)
	}
	return res, nil
}

// fileReplies puts every kept-reply hash that the reply index lacks back
// in it, to end a ReplyTTL from now: the hashes have no TTL, and only the
// index gets them swept (reply.lua). It returns how many it filed.
func (q *Queue) fileReplies(ctx context.Context, node redis.Cmdable) (int, error) {
	var hashes []string
	if err := scanAll(ctx, func(cur uint64) *redis.ScanCmd { return node.Scan(ctx, cur, globEscape(q.k.rp)+"*", 1000) }, func(ks []string) {
		for _, k := range ks {
			if k != q.k.rpIdx {
				hashes = append(hashes, k)
			}
		}
	}); err != nil {
		return 0, wrapErr(ctx, "repair: scan replies", err)
	}
	if len(hashes) == 0 {
		return 0, nil
	}
	now, err := node.Time(ctx).Result()
	if err != nil {
		return 0, wrapErr(ctx, "repair: time", err)
	}
	end := float64(now.Add(q.o.ReplyTTL).UnixMilli())
	filed := 0
	for start := 0; start < len(hashes); start += 1000 {
		part := hashes[start:min(start+1000, len(hashes))]
		zs := make([]redis.Z, len(part))
		for i, h := range part {
			zs[i] = redis.Z{Score: end, Member: h}
		}
		n, err := node.ZAddNX(ctx, q.k.rpIdx, zs...).Result()
		if err != nil {
			return filed, wrapErr(ctx, "repair: file replies", err)
		}
		filed += int(n)
	}
	if filed > 0 {
		q.o.obs.OnWarning(q.name, fmt.Errorf("delay: %d kept-reply hashes were missing from the reply index; filed again", filed))
	}
	return filed, nil
}

// node is the client of the server that holds the queue's slot: SCAN and
// CONFIG reach one node, and on a cluster it must be that one.
func (q *Queue) node(ctx context.Context) (redis.Cmdable, error) {
	if cc, ok := q.c.(*redis.ClusterClient); ok {
		c, err := cc.MasterForKey(ctx, q.k.ctr)
		if err != nil {
			return nil, wrapErr(ctx, "node", err)
		}
		return c, nil
	}
	return q.c, nil
}

// scanAll runs a SCAN-family cursor to its end.
func scanAll(ctx context.Context, step func(cursor uint64) *redis.ScanCmd, fn func([]string)) error {
	var cur uint64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		page, next, err := step(cur).Result()
		if err != nil {
			return err
		}
		fn(page)
		if next == 0 {
			return nil
		}
		cur = next
	}
}

// globEscape quotes the glob characters of s for a SCAN MATCH pattern.
func globEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ServerCheck is what Check learned about the server.
type ServerCheck struct {
	// Policy is the server's maxmemory-policy ("" when it could not be read).
	Policy string
	// Known: CONFIG GET answered. False on servers that refuse it (managed
	// services); Warning then wraps ErrConfigUnavailable.
	Known bool
	// Warning is what Check reported to Observer.OnWarning (nil when none).
	Warning error
}

// Check reads the server's maxmemory-policy (CONFIG GET, on the queue's
// node). The queue needs a server that never evicts its keys: noeviction,
// or volatile-* (only keys with a TTL go; the queue's keys have none but
// the wake list, whose loss costs a wakeup). allkeys-* can evict any key
// and lose tasks: Check returns ErrEvictionPolicy, or only warns through
// Observer.OnWarning when Options.AllowEviction. A server that refuses
// CONFIG gets a warning wrapping ErrConfigUnavailable, never an error; a
// server that refuses the client's login (NOAUTH, WRONGPASS) an error.
// Pool.Run calls it before its first take.
func (q *Queue) Check(ctx context.Context) (ServerCheck, error) {
	var res ServerCheck
	node, err := q.node(ctx)
	if err != nil {
		return res, err
	}
	m, err := node.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		if ctx.Err() != nil || !isRedisReplyErr(err) {
			return res, wrapErr(ctx, "check", err)
		}
		if refusedLogin(err) {
			return res, fmt.Errorf("delay: check: Redis refused the login: %w", err)
		}
		res.Warning = fmt.Errorf("%w: %w", ErrConfigUnavailable, err)
		q.o.obs.OnWarning(q.name, res.Warning)
		return res, nil
	}
	res.Policy, res.Known = m["maxmemory-policy"], true
	if res.Policy == "" {
		res.Known = false
		res.Warning = fmt.Errorf("%w: no maxmemory-policy in the reply", ErrConfigUnavailable)
		q.o.obs.OnWarning(q.name, res.Warning)
		return res, nil
	}
	if strings.HasPrefix(res.Policy, "allkeys-") {
		e := fmt.Errorf("%w: maxmemory-policy %s", ErrEvictionPolicy, res.Policy)
		if !q.o.AllowEviction {
			return res, e
		}
		res.Warning = e
		q.o.obs.OnWarning(q.name, e)
	}
	return res, nil
}
