package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/tierset/tierset/console"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/exampleredis"
)

// A console over a queue holding one due task: its browse page lists it.
func Example() {
	ctx := context.Background()
	rdb, mr := exampleredis.Start() // a program: redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer exampleredis.Stop(rdb, mr)
	mr.SetTime(time.Now())
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
