package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/tierset/tierset/console"
	"github.com/tierset/tierset/delay"
)

// A console over a queue holding one due task: its browse page lists it.
func Example() {
	ctx := context.Background()
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	mr.SetTime(time.Now())
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	q, err := delay.New(rdb, "orders", delay.Options{})
	if err != nil {
		panic(err)
	}
	if _, err := q.Enqueue(ctx, delay.Job{Key: "order-42", Payload: []byte(`{"order":42}`)}); err != nil {
		panic(err)
	}
	c, err := console.New(ctx, console.Options{Client: rdb, Token: "s3cret", Loopback: true})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(c)
	defer srv.Close()
	res, err := http.Get(srv.URL + "/tasks?queue=orders&state=due")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	fmt.Println(res.StatusCode, strings.Contains(string(body), "order-42"))
	// Output: 200 true
}
