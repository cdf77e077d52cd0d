package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/delayraw"
	"github.com/tierset/tierset/internal/soak"
	"github.com/tierset/tierset/internal/testredis"
)

// scriptWidth is a go-redis hook that keeps the most arguments any
// mutating delay script (one carrying a reply key, ":rp:") was sent.
type scriptWidth struct{ most atomic.Int64 }

func (h *scriptWidth) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptWidth) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *scriptWidth) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); (n == "evalsha" || n == "eval") && (&mutationGate{}).mutating(cmd.Args()) {
			for w := int64(len(cmd.Args())); ; {
				m := h.most.Load()
				if w <= m || h.most.CompareAndSwap(m, w) {
					break
				}
			}
		}
		return next(ctx, cmd)
	}
}

// killMany enqueues n tasks of q, key(i) and error cause(i) for the i-th,
// and dead-letters every one of them.
func killMany(t *testing.T, ctx context.Context, q *delay.Queue, n int, key func(int) string, cause func(int) error) {
	t.Helper()
	jobs := make([]delay.Job, 0, delay.MaxBatch)
	byKey := map[string]error{}
	for i := range n {
		byKey[key(i)] = cause(i)
		jobs = append(jobs, delay.Job{Key: key(i), Payload: []byte("p")})
		if len(jobs) == cap(jobs) || i == n-1 {
			if _, err := q.EnqueueBatch(ctx, jobs); err != nil {
				t.Fatal(err)
			}
			jobs = jobs[:0]
		}
	}
	for left := n; left > 0; {
		batch, err := delayraw.Take(ctx, q, min(left, delay.MaxBatch))
		if err != nil || len(batch) == 0 {
			t.Fatalf("take: %d, %v", len(batch), err)
		}
		left -= len(batch)
		var wg sync.WaitGroup
		errs := make(chan error, len(batch))
		work := make(chan *delay.Task)
		for range 16 {
			wg.Go(func() {
				for tk := range work {
					if _, err := delayraw.Kill(ctx, q, tk, byKey[tk.Key]); err != nil {
						errs <- err
					}
				}
			})
		}
		for _, tk := range batch {
			work <- tk
		}
		close(work)
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

var (
	confirmCountRe = regexp.MustCompile(`id="confirm-count" data-count="(\d+)"`)
	jobRe          = regexp.MustCompile(`id="job" data-status="(\w+)" data-expected="(\d+)" data-done="(\d+)" data-skipped="(\d+)" data-batches="(\d+)"`)
)

// jobState is a job page's counts.
type jobState struct {
	status                           string
	expected, done, skipped, batches int64
}

// waitJob polls the job page at loc until the job is no longer running,
// for at most a minute.
func waitJob(t *testing.T, c *http.Client, base, loc string) jobState {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		code, body := get(t, c, base+loc)
		m := jobRe.FindStringSubmatch(body)
		if code != http.StatusOK || m == nil {
			t.Fatalf("job page %s: %d, no counts", loc, code)
		}
		n := func(i int) int64 { v, _ := strconv.ParseInt(m[i], 10, 64); return v }
		if js := (jobState{m[1], n(2), n(3), n(4), n(5)}); js.status != "running" {
			return js
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still running after a minute", loc)
		}
		<-tick.C
	}
}

// TestConsoleFilterWide: a dead-letter backlog (20k tasks; 100k under the
// soak switch), half of one key prefix. "Requeue every dead task whose
// key starts acme-" counts the matches on its confirm page, changes
// nothing there or on a POST without the confirm field, CSRF token or
// console token, and then runs as a job in batches no larger than
// bulkBatch: every match requeued, the tasks removed between the count
// and the POST and the one removed between its batch's listing and
// script counted as skipped, the other half untouched; the action log
// has it. A delete by error text then removes the other half.
func TestConsoleFilterWide(t *testing.T) {
	n := soak.Pick(100_000, 20_000)
	b := testredis.Redis(t)
	width := &scriptWidth{}
	opt := b.Client.(*redis.Client).Options()
	hooked := redis.NewClient(opt)
	hooked.AddHook(width)
	t.Cleanup(func() { _ = hooked.Close() })
	f := seedConsoleWith(t, b, true, func(o *Options) { o.Client = hooked })
	ctx := t.Context()
	key := func(i int) string {
		if i%2 == 0 {
			return fmt.Sprintf("acme-%06d", i)
		}
		return fmt.Sprintf("other-%06d", i)
	}
	cause := func(i int) error {
		if i%2 == 0 {
			return errors.New("payment service said 503")
		}
		return errors.New("stock service timed out")
	}
	start := time.Now()
	killMany(t, ctx, f.q, n, key, cause)
	t.Logf("%d dead letters in %v", n, time.Since(start).Round(time.Millisecond))
	deadNow := func() int64 {
		st, err := f.q.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.Dead
	}
	before := deadNow() // n and the fixture's own two
	if before != int64(n)+2 {
		t.Fatalf("dead %d, want %d", before, n+2)
	}

	c := browser(t)
	filter := url.Values{"queue": {"orders"}, "state": {"dead"}, "key": {"acme-"}}
	if code, body := get(t, c, f.url+"/tasks?"+filter.Encode()); code != http.StatusOK || !strings.Contains(body, `id="bulk-filter"`) {
		t.Fatalf("tasks page: %d, has the filter-wide form: %v", code, strings.Contains(body, `id="bulk-filter"`))
	}
	cq := url.Values{"scope": {"filter"}, "action": {"requeue"}, "back": {"/tasks?" + filter.Encode()}}
	for k, v := range filter {
		cq[k] = v
	}
	start = time.Now()
	code, body := get(t, c, f.url+"/confirm?"+cq.Encode())
	t.Logf("confirm page counted %d of %d in %v", n/2, n, time.Since(start).Round(time.Millisecond))
	m := confirmCountRe.FindStringSubmatch(body)
	if code != http.StatusOK || m == nil || m[1] != strconv.Itoa(n/2) {
		t.Fatalf("confirm page: %d, count %v, want %d", code, m, n/2)
	}
	if got := deadNow(); got != before {
		t.Fatalf("the confirm page changed the dead count: %d, was %d", got, before)
	}
	form := url.Values{"csrf": {csrfRe.FindStringSubmatch(body)[1]}, "token": {webToken}}
	for _, fld := range fieldRe.FindAllStringSubmatch(body, -1) {
		if fld[1] != "csrf" {
			form.Set(fld[1], fld[2])
		}
	}
	if form.Get("scope") != "filter" || form.Get("expected") != strconv.Itoa(n/2) || form.Get("asof") == "" {
		t.Fatalf("confirm form %v", form)
	}
	refusedWithout(t, c, f.url+"/act", form, "filter-wide")
	if got := deadNow(); got != before {
		t.Fatalf("a refused POST changed the dead count: %d, was %d", got, before)
	}
	// Between the count and the POST the application removes some
	// matches: the job cannot act on them and counts them as skipped.
	const gone = 7
	var goneIDs []string
	p, err := f.q.List(ctx, delay.ListOptions{State: delay.StateDead, KeyPrefix: "acme-", Limit: gone})
	if err != nil || len(p.Tasks) != gone {
		t.Fatalf("list: %d, %v", len(p.Tasks), err)
	}
	for _, tk := range p.Tasks {
		goneIDs = append(goneIDs, tk.ID)
	}
	if res, err := f.q.Cancel(ctx, delay.Selector{IDs: goneIDs}); err != nil || res.Found != gone {
		t.Fatalf("cancel: %+v, %v", res, err)
	}
	// And one more after the job listed its first batch, before that
	// batch's script: the script skips it, and the job counts it.
	gate := &mutationGate{fn: func(ctx context.Context) error {
		p, err := f.q.List(ctx, delay.ListOptions{State: delay.StateDead, KeyPrefix: "acme-", Limit: 1})
		if err != nil || len(p.Tasks) != 1 {
			return fmt.Errorf("list: %d, %v", len(p.Tasks), err)
		}
		res, err := f.q.Cancel(ctx, delay.Selector{IDs: []string{p.Tasks[0].ID}})
		if err == nil && res.Found != 1 {
			err = fmt.Errorf("cancel found %d", res.Found)
		}
		return err
	}}
	hooked.AddHook(gate)
	gate.armed.Store(true)
	width.most.Store(0)
	start = time.Now()
	res := postRaw(t, c, f.url+"/act", form, nil)
	loc := res.Header.Get("Location")
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/job?id=") {
		t.Fatalf("POST: %d to %q", res.StatusCode, loc)
	}
	js := waitJob(t, c, f.url, loc)
	t.Logf("requeued %d in %v", js.done, time.Since(start).Round(time.Millisecond))
	gate.mu.Lock()
	ran, gerr := gate.ran, gate.err
	gate.mu.Unlock()
	if !ran || gerr != nil {
		t.Fatalf("the removal before the first batch's script: ran %v, %v", ran, gerr)
	}
	matched := int64(n/2 - gone) // the one removed before its batch's script was listed
	want := jobState{"done", int64(n / 2), matched - 1, gone + 1, (matched + bulkBatch - 1) / bulkBatch}
	if js != want {
		t.Errorf("job %+v, want %+v", js, want)
	}
	// A script's arguments: the SHA, key count, keys, a few fixed
	// arguments and the IDs.
	var api jobView
	code, body = get(t, c, f.url+"/api/"+strings.TrimPrefix(loc, "/"))
	if err := json.Unmarshal([]byte(body), &api); err != nil || code != http.StatusOK ||
		(jobState{api.Status, api.Expected, api.Done, api.Skipped, api.Batches}) != js || api.Matched != matched || api.Ended.IsZero() {
		t.Errorf("/api%s: %d %+v (%v), want the page's %+v", loc, code, api, err, js)
	}
	for _, bad := range []struct {
		id   string
		code int
	}{{"0123456789abcdef", http.StatusNotFound}, {"x", http.StatusBadRequest}} {
		if code, body := get(t, c, f.url+"/api/job?id="+bad.id); code != bad.code || !strings.Contains(body, `"error"`) {
			t.Errorf("/api/job?id=%s: %d %s, want %d and an error", bad.id, code, body, bad.code)
		}
	}
	if w := width.most.Load(); w > bulkBatch+20 || w < bulkBatch {
		t.Errorf("the widest action script had %d arguments, want about %d (one batch)", w, bulkBatch)
	}
	if got, want := deadNow(), int64(n-n/2)+2; got != want {
		t.Errorf("dead after the requeue: %d, want %d (the other keys' and the fixture's)", got, want)
	}
	if p, err := f.q.List(ctx, delay.ListOptions{State: delay.StateDead, KeyPrefix: "acme-", Limit: 1, ScanLimit: n + 10}); err != nil || len(p.Tasks) != 0 {
		t.Errorf("an acme- task still dead: %d, %v", len(p.Tasks), err)
	}

	// The same on the other half, by error text, with delete.
	cq = url.Values{"scope": {"filter"}, "action": {"delete"}, "queue": {"orders"}, "state": {"dead"}, "err": {"stock service"}}
	code, body = get(t, c, f.url+"/confirm?"+cq.Encode())
	if m := confirmCountRe.FindStringSubmatch(body); code != http.StatusOK || m == nil || m[1] != strconv.Itoa(n-n/2) {
		t.Fatalf("delete confirm page: %d, count %v, want %d", code, m, n-n/2)
	}
	form = url.Values{"csrf": {csrfRe.FindStringSubmatch(body)[1]}, "token": {webToken}}
	for _, fld := range fieldRe.FindAllStringSubmatch(body, -1) {
		if fld[1] != "csrf" {
			form.Set(fld[1], fld[2])
		}
	}
	res = postRaw(t, c, f.url+"/act", form, nil)
	js = waitJob(t, c, f.url, res.Header.Get("Location"))
	if half := int64(n - n/2); js.status != "done" || js.done != half || js.skipped != 0 {
		t.Errorf("delete job %+v, want %d done", js, half)
	}
	if got := deadNow(); got != 2 {
		t.Errorf("dead after the delete: %d, want the fixture's 2", got)
	}

	rows, err := f.srv.readLog(ctx, "orders", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("log: %d entries, want 2: %+v", len(rows), rows)
	}
	if r := rows[1]; r.Action != "requeue" || r.Done != int(matched)-1 || r.Skipped != gone+1 || r.Tasks != n/2 ||
		!strings.HasPrefix(r.Who, "token from 127.0.0.1") || !strings.Contains(r.Filter, `"acme-"`) || r.Job == "" {
		t.Errorf("requeue's log entry %+v", r)
	}
	if r := rows[0]; r.Action != "delete" || r.Done != n-n/2 || !strings.Contains(r.Filter, `"stock service"`) {
		t.Errorf("delete's log entry %+v", r)
	}
	if code, body := get(t, c, f.url+"/log?queue=orders"); code != http.StatusOK || strings.Count(body, `<td class="action">`) != 2 {
		t.Errorf("log page: %d, %d entries", code, strings.Count(body, `<td class="action">`))
	}
}
