package console

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/gradient"
	"github.com/tierset/tierset/internal/testredis"
)

// BenchmarkWebPages: each console page on real Redis holding one queue of
// 100k tasks (90k pending, 5k in flight, 5k dead) and 10k promotions.
// "promotions-cold" lists the IDs on every request (SCAN of the whole
// keyspace); the others reuse a listing younger than -ids-ttl, as the
// console does by default. The part-* cases time the two halves of
// promotions-cold alone: the ID listing, and one page's Cache.Info reads.
func BenchmarkWebPages(b *testing.B) {
	be := testredis.Redis(b)
	ctx := b.Context()
	q, err := delay.New(be.Client, "bench", delay.Options{Prefix: be.Prefix, Lease: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	past := time.Now().Add(-time.Minute)
	enqueueBench(b, ctx, q, 100_000, func(i int) delay.Job {
		return delay.Job{Key: fmt.Sprintf("order-%d", i), Payload: []byte("reservation 42"), When: delay.At(past.Add(time.Duration(i) * time.Millisecond))}
	})
	killHalves(b, ctx, q, 10) // 10k taken: half killed, half left in flight
	c, err := cache.New(be.Client, cache.Options{Prefix: be.Prefix})
	if err != nil {
		b.Fatal(err)
	}
	promos := benchPromotions(10_000)
	for i := range promos {
		promos[i].Tiers[4].Gifts = []gradient.Gift{{SKU: "tote", Qty: 1, Name: "Tote bag"}}
	}
	if _, err := c.Refresh(ctx, promos...); err != nil {
		b.Fatal(err)
	}
	st, err := q.Stats(ctx)
	if err != nil || st.Pending != 90_000 || st.InFlight != 5_000 || st.Dead != 5_000 {
		b.Fatalf("seeded Stats %+v, %v", st, err)
	}
	console := func(idsTTL time.Duration) string {
		if idsTTL == 0 {
			idsTTL = -1 // list on every request
		}
		srv, err := New(ctx, Options{Client: be.Client, Redis: "bench", Token: "t", Loopback: true,
			QueuePrefix: be.Prefix, CachePrefix: be.Prefix, IDsTTL: idsTTL})
		if err != nil {
			b.Fatal(err)
		}
		hs := httptest.NewServer(srv)
		b.Cleanup(hs.Close)
		return hs.URL
	}
	warm, cold := console(time.Hour), console(0)
	if n, err := be.Client.DBSize(ctx).Result(); err == nil {
		b.Logf("keys in the database (SCAN walks all of them): %d", n)
	}
	// The parts of promotions-cold: the ID listing (SCAN) and one page's
	// rows (Cache.Info per ID).
	b.Run("part-ids-scan", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.IDs(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("part-page-rows", func(b *testing.B) {
		ids := make([]string, promoPageSize)
		for i := range ids {
			ids[i] = promos[7000+i].ID
		}
		for b.Loop() {
			if _, err := pageRows(ctx, c, ids, time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, p := range []struct{ name, base, path string }{
		{"queues", warm, "/queues"},
		{"dead-first-page", warm, "/dead?queue=bench"},
		{"dead-last-page", warm, "/dead?queue=bench&page=100"},
		{"promotions", warm, "/promotions"},
		{"promotions-search", warm, "/promotions?q=" + url.QueryEscape("99")},
		{"promotions-cold", cold, "/promotions?page=150"},
		{"promotion-simulate", warm, "/promotion?id=promo-04242&value=9"},
		{"lookup", warm, "/lookup?queue=bench&key=order-4242"},
	} {
		b.Run(p.name, func(b *testing.B) { benchGet(b, p.base+p.path, 1000) })
	}
}

// benchGet times whole GETs of url, each of which must answer 200 with
// at least minBytes of body.
func benchGet(b *testing.B, url string, minBytes int64) {
	b.Helper()
	for b.Loop() {
		res, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK || n < minBytes {
			b.Fatalf("GET %s: %d, %d bytes, %v", url, res.StatusCode, n, err)
		}
	}
}
