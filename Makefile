# The targets people reach for; each runs what .ci/run runs (TestMakefileMatchesCI
# in internal/doccheck keeps the commands identical).

.PHONY: test soak race lint generate bench

# The README's test command: every package, the soaks skipped.
test:
	go test -count=1 -timeout 30m ./...

# The same with the soak switch on: long, multi-process and fault-schedule tests too.
soak:
	TIERSET_SOAK=1 go test -count=1 -timeout 30m ./...

race:
	go test -race -count=1 -timeout 40m ./...

lint:
	test -z "$$(gofmt -l .)" && go vet ./... && for m in . pg contrib/prometheus contrib/cron bench/peers test/browser; do (cd $$m && go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...) || exit 1; done

generate:
	go generate ./...

bench:
	go run ./bench
