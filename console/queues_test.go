package console

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/testredis"
)

// TestWebQueuesManyQueues: past maxCards queues the Queues page is the
// summary table alone, a row per queue whose counts are its Stats, and
// no card; at maxCards it has both.
func TestWebQueuesManyQueues(t *testing.T) {
	for _, n := range []int{maxCards, maxCards + 8} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			b := testredis.Mini(t)
			ctx := t.Context()
			qs := make([]*delay.Queue, n)
			for i := range qs {
				q, err := delay.New(b.Client, fmt.Sprintf("q%02d", i), delay.Options{Prefix: b.Prefix})
				if err != nil {
					t.Fatal(err)
				}
				for j := range i + 1 {
					if _, err := q.Enqueue(ctx, delay.Job{Key: fmt.Sprintf("k%d", j), When: delay.After(time.Duration(j) * time.Hour)}); err != nil {
						t.Fatal(err)
					}
				}
				qs[i] = q
			}
			srv, err := New(ctx, Options{Client: b.Client, Token: webToken, Loopback: true, QueuePrefix: b.Prefix, CachePrefix: b.Prefix, IDsTTL: -1})
			if err != nil {
				t.Fatal(err)
			}
			code, body := serveGet(t, srv, "/queues")
			if code != http.StatusOK {
				t.Fatalf("queues page: %d", code)
			}
			rowRe := regexp.MustCompile(`<tr data-queue="(q\d\d)">\s*<td><a[^>]*>q\d\d</a></td>\s*<td><a[^>]*>(\d+)</a></td><td><a[^>]*>(\d+)</a></td>`)
			rows := rowRe.FindAllStringSubmatch(body, -1)
			if len(rows) != n {
				t.Fatalf("%d summary rows, want %d", len(rows), n)
			}
			for i, row := range rows {
				st, err := qs[i].Stats(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if row[1] != qs[i].Name() || row[2] != strconv.FormatInt(st.Ready, 10) || row[3] != strconv.FormatInt(st.Pending-st.Ready, 10) {
					t.Errorf("row %v, Stats ready %d pending %d", row[1:], st.Ready, st.Pending)
				}
			}
			cards, omitted := strings.Count(body, `<section class="card queue"`), strings.Contains(body, `id="cards-omitted"`)
			if wantCards := n <= maxCards; (cards == n) != wantCards || (cards == 0) != !wantCards || omitted == wantCards {
				t.Errorf("%d queues: %d cards, omitted note %v", n, cards, omitted)
			}
		})
	}
}

// serveGet answers GET path from h directly, as from loopback.
func serveGet(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "http://127.0.0.1"+path, nil)
	req.RemoteAddr = "127.0.0.1:1234"
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}
