// Package exampleredis gives the Examples a Redis to run on: an embedded
// one (miniredis), where a program connects to its own server.
package exampleredis

import (
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Start starts an embedded Redis and returns a client of it, made as a
// program makes its own with its server's address:
//
//	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
//
// (ContextTimeoutEnabled lets a call's ctx deadline bound it). The caller
// closes both; mr also sets the server's clock for Examples about time.
// It panics if the server does not start: an Example has no t to fail.
func Start() (rdb *redis.Client, mr *miniredis.Miniredis) {
	mr = miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	return redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true}), mr
}

// Stop closes what Start returned: the client, then the server.
func Stop(rdb *redis.Client, mr *miniredis.Miniredis) {
	_ = rdb.Close()
	mr.Close()
}
