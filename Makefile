# layerprobe. `make agent` runs the agent; `make run` measures this host once;
# `make test` runs every test.
GO            ?= go
BIN           := bin/layerprobe
STATICCHECK   := honnef.co/go/tools/cmd/staticcheck@v0.8.2
TEST_TIMEOUT  ?= 30m

.PHONY: all build deps agent run test lint unit clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN) ./cmd/layerprobe

deps:
	./scripts/install-deps.sh

# The agent with its built-in defaults: a cycle soon after start, then every 6 h;
# /metrics and the REST API on :9811.
agent: deps build
	./scripts/ensure-dockerd.sh
	./$(BIN) agent

# Measure this host once with the default profile and print the table.
run: deps build
	./scripts/ensure-dockerd.sh
	./$(BIN) run

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

# Every test: unit tests, and end-to-end tests against private dockerd
# daemons (overlay2, btrfs on a loop file, vfs) with real fio. Needs root.
test: deps lint
	$(GO) test -race -timeout $(TEST_TIMEOUT) -count=1 ./...

# Unit tests only (no root, no daemons).
unit:
	$(GO) test -race -short ./...

clean:
	rm -rf bin
