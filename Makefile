# gatehouse — the two commands a newcomer needs are `make run` and `make test`.
GO        ?= go
BIN       := bin/gatehouse
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)
# Packages tested; the race detector stays on because concurrency is part of
# correctness here (nonces, stock, state machines).
TESTFLAGS ?= -race -count=1 -timeout 15m

.PHONY: all generate migration build run test lint bench bench-micro clean

all: build

## generate: regenerate the Ent client, web-schema/ent.graphql, the gqlgen executor, the
## settings tables of docs/configuration.md and the publish API's Go client (oapi-codegen)
generate:
	$(GO) generate ./ent/
	$(GO) tool gqlgen generate
	$(GO) generate ./internal/config/
	$(GO) generate ./rest/publishclient/

## migration: after changing ent/schema, regenerate the code and write the next migration of each
## database (Postgres and SQLite, one version) from the difference (make migration name=add_refund_reason);
## needs the local Postgres (see docs/migrations.md); on an up-to-date tree it writes nothing
migration: generate
	@test -n "$(name)" || { echo "usage: make migration name=<what_changed, snake_case>"; exit 2; }
	$(GO) run ./cmd/gatehouse-migration -name "$(name)"

## build: compile bin/gatehouse
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/gatehouse

## run: start on the embedded default (SQLite + in-process store) with demo data;
## make run ARGS=--reset starts the demo afresh (the previous database is moved to data/before-reset/)
run: build
	./$(BIN) serve --demo $(ARGS)

## test: every test, on SQLite + memory and on Postgres + Redis
test:
	$(GO) test $(TESTFLAGS) ./...

## lint: gofmt, go vet, staticcheck (generated Ent code excluded; ent/schema included)
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^ent/' ; ls ent/schema/*.go ent/entc.go ent/generate.go)); \
		if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck $$($(GO) list ./... | grep -v '^gatehouse/ent' ) gatehouse/ent/schema

## bench: load harness (cmd/gatehouse-bench): gatehouse as its own process, embedded and on
## Postgres + Redis, against baselines measured in the same run; about 3½ min; JSON in bin/bench.json
bench: build
	$(GO) build -o bin/gatehouse-bench ./cmd/gatehouse-bench
	./bin/gatehouse-bench -gatehouse $(BIN) -out bin/bench.json

## bench-micro: the in-package Go benchmarks (signature gate, deduction vs plain UPDATE,
## webhook deliveries/s and first-attempt latency, kv Admit), each reporting its ratio
bench-micro:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf bin data
