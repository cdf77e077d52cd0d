package browser

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/testredis"
)

// TestBrowserRedisDown: with the console's Redis stopped, a page is the
// red banner naming the cause (status 503), not a page that reads "no
// queues"; with Redis back, the same page is the queue again.
func TestBrowserRedisDown(t *testing.T) {
	// private, on a free port the kernel picks: this test stops it
	srv := testredis.StartServer(t)
	c := srv.Client(nil)
	const prefix = "downtest"
	q, err := delay.New(c, "orders", delay.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(t.Context(), delay.Job{Key: "order-1"}); err != nil {
		t.Fatal(err)
	}
	ctx := newBrowser(t)
	base := startConsoleOn(t, srv.URL(), prefix)
	dir := shots(t)
	do(t, ctx, "log in", chromedp.Navigate(base+"/login?next="+url.QueryEscape("/queue?name=orders")),
		chromedp.WaitVisible(css(`#token`)), chromedp.SendKeys(css(`#token`), token), chromedp.Click(css(`#login-submit`)),
		chromedp.WaitVisible(css(`#verdict-orders`)))

	srv.Kill()
	do(t, ctx, "page with Redis down", chromedp.Navigate(base+"/queue?name=orders"), chromedp.WaitVisible(css(`#redis-down`)))
	banner := get(t, ctx, "banner", chromedp.Text(css(`#redis-down`)))
	if !strings.Contains(banner, "Redis is unreachable") || !strings.Contains(banner, srv.Addr()) {
		t.Errorf("banner %q does not name the server %s", banner, srv.Addr())
	}
	if n := get(t, ctx, "queue on the down page", chromedp.Evaluate[int](`document.querySelectorAll('#verdict-orders').length`)); n != 0 {
		t.Errorf("the down page still shows the queue")
	}
	resp, err := http.Get(base + "/queue?name=orders") // read-only pages open on loopback
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("status with Redis down: %d, want 503", resp.StatusCode)
	}
	screenshot(t, ctx, dir, "redis-down")

	srv.Start()
	do(t, ctx, "page with Redis back", chromedp.Navigate(base+"/queue?name=orders"), chromedp.WaitVisible(css(`#verdict-orders`)))
	if n := get(t, ctx, "banner after restart", chromedp.Evaluate[int](`document.querySelectorAll('#redis-down').length`)); n != 0 {
		t.Errorf("the banner stays after Redis came back")
	}
}
