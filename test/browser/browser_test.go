package browser

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/shopspring/decimal"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/delayraw"
	"github.com/tierset/tierset/internal/testredis"
)

const (
	token    = "browser-test-token"
	xssName  = `<script>alert("promo")</script>`
	xssError = `<script>alert("dead")</script> & 503`
)

// earlierErrors are the causes of the first dead task's retries before
// it died of xssError, oldest first.
var earlierErrors = []error{errors.New(`stock <img src=x onerror=alert(1)> timed out`), errors.New("stock service said 502")}

// chromium finds the browser: $CHROMIUM, else chromium or chromium-browser on PATH.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on PATH (apt-get install chromium, or set $CHROMIUM)")
	return ""
}

// fixture is real Redis seeded with one queue and three promotions.
type fixture struct {
	b      *testredis.Backend
	q      *delay.Queue
	c      *cache.Cache
	dead   []string
	promos map[string]gradient.Promotion
}

func seed(t *testing.T) *fixture {
	t.Helper()
	b := testredis.Redis(t)
	ctx := t.Context()
	f := &fixture{b: b, promos: map[string]gradient.Promotion{}}
	var err error
	if f.q, err = delay.New(b.Client, "orders", delay.Options{Prefix: b.Prefix, Lease: time.Hour}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i := range 40 {
		d := time.Duration(i-20) * 3 * time.Second // 20 overdue, 20 due within the minute or so
		if _, err := f.q.Enqueue(ctx, delay.Job{Key: fmt.Sprintf("order-%03d", i), Payload: []byte(`{"order":` + strconv.Itoa(i) + `}`), When: delay.At(now.Add(d))}); err != nil {
			t.Fatal(err)
		}
	}
	// The first task to die (order-000, the soonest due) fails twice
	// before, so its page has earlier errors to list; a reschedule puts
	// it back at the head of the due set after each retry.
	for _, cause := range earlierErrors {
		b, err := delayraw.Take(ctx, f.q, 1)
		if err != nil || len(b) != 1 || b[0].Key != "order-000" {
			t.Fatalf("take order-000: %+v, %v", b, err)
		}
		if _, err := delayraw.RetryAfter(ctx, f.q, b[0], 0, cause); err != nil {
			t.Fatal(err)
		}
		if _, err := f.q.Reschedule(ctx, delay.Selector{Key: "order-000"}, delay.At(now.Add(-20*3*time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	batch, err := delayraw.Take(ctx, f.q, 8)
	if err != nil || len(batch) != 8 {
		t.Fatalf("take: %d, %v", len(batch), err)
	}
	for i, tk := range batch[:5] {
		cause := errors.New("payment service said 503")
		if i == 0 {
			cause = errors.New(xssError)
		}
		if _, err := delayraw.Kill(ctx, f.q, tk, cause); err != nil {
			t.Fatal(err)
		}
		f.dead = append(f.dead, tk.ID)
	}
	if errs, err := delayraw.Ack(ctx, f.q, batch[5:6]); err != nil || errors.Join(errs...) != nil {
		t.Fatal(err, errs)
	}
	pct := func(p int64) gradient.Reward {
		return gradient.Reward{Kind: gradient.PercentOff, Percent: decimal.NewFromInt(p)}
	}
	off := func(a int64) gradient.Reward {
		return gradient.Reward{Kind: gradient.AmountOff, Amount: decimal.NewFromInt(a)}
	}
	for _, p := range []gradient.Promotion{
		{ID: "buy-more", Metric: gradient.Quantity, Tiers: []gradient.Tier{
			{ID: "2+", Threshold: decimal.NewFromInt(2), Reward: pct(5)},
			{ID: "3+", Threshold: decimal.NewFromInt(3), Reward: pct(10)},
			{ID: "5+", Threshold: decimal.NewFromInt(5), Reward: pct(20), Gifts: []gradient.Gift{{SKU: "tote-bag", Qty: 1, Name: "Tote bag"}}},
			{ID: "10+", Threshold: decimal.NewFromInt(10), Reward: pct(30)},
		}},
		{ID: "spend-more", Metric: gradient.Amount, MinorDigits: 2, Tiers: []gradient.Tier{
			{ID: "99", Threshold: decimal.NewFromInt(99), Reward: off(10)},
			{ID: "199.99", Threshold: decimal.RequireFromString("199.99"), Reward: off(30)},
			{ID: "500", Threshold: decimal.NewFromInt(500), Reward: off(90)},
		}},
		{ID: xssName, Metric: gradient.Quantity, Tiers: []gradient.Tier{
			{ID: "1+", Threshold: decimal.NewFromInt(1), Reward: pct(1), Gifts: []gradient.Gift{{SKU: "x", Qty: 1, Name: `<img src=x onerror=alert(1)>`}}},
		}},
	} {
		f.promos[p.ID] = p
		if f.c == nil {
			if f.c, err = cache.New(b.Client, cache.Options{Prefix: b.Prefix}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.c.Refresh(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

var listenRe = regexp.MustCompile(`on (http://127\.0\.0\.1:\d+)/`)

// startConsole builds the CLI and runs "tierset web" on the fixture's prefixes.
func startConsole(t *testing.T, f *fixture) string {
	t.Helper()
	return startConsoleOn(t, testredis.URL(), f.b.Prefix)
}

// startConsoleOn runs "tierset web" against the server at redisURL.
func startConsoleOn(t *testing.T, redisURL, prefix string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tierset")
	build := exec.Command("go", "build", "-o", bin, "./cmd/tierset")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "web", "-redis", redisURL, "-listen", "127.0.0.1:0", "-token", token,
		"-prefix", prefix, "-cache-prefix", prefix, "-ids-ttl", "0")
	stderr := testredis.StartChildPipe(t, cmd, cmd.StderrPipe)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listenRe.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		close(found)
	}()
	select {
	case u, ok := <-found:
		if !ok {
			t.Fatal("tierset web exited before it listened")
		}
		return u
	case <-time.After(30 * time.Second):
		t.Fatal("tierset web did not print its address within 30 s")
	}
	return ""
}

// newBrowser starts headless Chromium with a fresh profile.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-default-browser-check", true),
		// Only the console's own address resolves: a redirect off-site
		// fails at once instead of waiting on DNS.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancel := chromedp.NewExecAllocator(t.Context(), opts...)
	t.Cleanup(cancel)
	bctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	// The first call starts the browser and must not carry a timeout
	// (it would stop the browser); the steps after it get one.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	ctx, cancel := context.WithTimeout(bctx, 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// shots is where screenshots go: $TIERSET_SCREENSHOTS, else a temp dir.
func shots(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("TIERSET_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	d, err := os.MkdirTemp("", "tierset-console-shots")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png := get(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	p := filepath.Join(dir, "console-"+name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", p)
}

// do runs browser steps, failing the test with what on error.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// get runs one browser action that returns a value.
func get[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// css is a CSS selector for the first matching element.
func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// deadOrder is the dead set's IDs as List pages them, oldest first.
func deadOrder(t *testing.T, q *delay.Queue) []string {
	t.Helper()
	p, err := q.List(t.Context(), delay.ListOptions{State: delay.StateDead, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return idsOf(p.Tasks, func(d delay.TaskInfo) string { return d.ID })
}

// idsOf is the IDs of a page's entries, in the page's order.
func idsOf[E any](entries []E, id func(E) string) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = id(e)
	}
	return out
}

// overview is what the Queues page lists: the tasks due now then those
// due within a minute (five in all), how many fall due within a minute,
// and the oldest leases.
type overview struct {
	Due, InFlight []delay.TaskInfo
	DueSoon       int64
}

func queueOverview(ctx context.Context, q *delay.Queue) (overview, error) {
	due, err := q.List(ctx, delay.ListOptions{State: delay.StateDue, Limit: 5})
	if err != nil {
		return overview{}, err
	}
	soon, err := q.List(ctx, delay.ListOptions{State: delay.StateScheduled, To: q.ServerNow().Add(time.Minute), Limit: 5})
	if err != nil {
		return overview{}, err
	}
	fl, err := q.List(ctx, delay.ListOptions{State: delay.StateInFlight, Limit: 5})
	if err != nil {
		return overview{}, err
	}
	all := append(due.Tasks, soon.Tasks...)
	return overview{Due: all[:min(5, len(all))], InFlight: fl.Tasks, DueSoon: soon.Total}, nil
}

// steady calls visit between two reads of the queue and returns the read
// once both agree. Seeded tasks fall due every 3 s, so a page is compared
// only with a state that held throughout its visit; it tries 5 times.
func steady(t *testing.T, read func() []string, visit func()) []string {
	t.Helper()
	for range 5 {
		before := read()
		visit()
		if slices.Equal(before, read()) {
			return before
		}
	}
	t.Fatalf("the queue changed during each of 5 visits of the page")
	return nil
}

// tasksOf lists the tasks of a business key (delay.Queue.List by Key).
func tasksOf(ctx context.Context, q *delay.Queue, key string) ([]delay.TaskInfo, error) {
	p, err := q.List(ctx, delay.ListOptions{Key: key})
	return p.Tasks, err
}
