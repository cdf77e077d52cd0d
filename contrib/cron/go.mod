module github.com/tierset/tierset/contrib/cron

go 1.26.0

require (
	github.com/robfig/cron/v3 v3.0.1
	github.com/tierset/tierset v0.1.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/redis/go-redis/v9 v9.23.0 // indirect
	github.com/shopspring/decimal v1.6.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
