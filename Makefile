# gatehouse — the two commands a newcomer needs are `make run` and `make test`.
GO        ?= go
BIN       := bin/gatehouse
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)
# Packages tested; the race detector stays on because concurrency is part of
# correctness here (nonces, stock, state machines). -p 4 on 2 cores: many
# test binaries spend their time waiting (on processes they start, timers,
# Postgres), and with -p 2 two of them held both slots while the other
# packages waited to be compiled (the machine 31 % idle over 14 min).
TESTFLAGS ?= -race -count=1 -timeout 15m -p 4
# The slowest packages first (go test starts them in the order given, the
# rest of ./... after them): internal/webhook alone takes 4–7 min, and
# reached alphabetically it began after 8 min and was the last to end.
# Measured on one 2-core VM: 14 min 14 s before (-p 2, alphabetical; the
# race build cold, about 2½ min of it compiling before the first test ran),
# 9 min 31 s after (build cache warm), 17 min 25 s with -p 4 alone (cold).
SLOWTESTS := ./internal/webhook ./graph ./cmd/gatehouse ./internal/demo ./internal/e2e ./rest/signin \
	./rest/partnerapi ./internal/inventory ./internal/fleettest ./internal/payment

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
# -trimpath (also for the binaries tests build): the build cache's entries
# then do not depend on the checkout's directory, so a clean clone elsewhere
# (CI's) reuses what an earlier run compiled instead of compiling it all
# again with the race detector.
test: export GOFLAGS := $(strip $(GOFLAGS) -trimpath)
test:
	$(GO) test $(TESTFLAGS) $(SLOWTESTS) ./...

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
