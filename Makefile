# layerprobe. `make agent` runs the agent; `make run` measures this host once;
# `make test` runs every test.
GO            ?= go
BIN           := bin/layerprobe
STATICCHECK   := honnef.co/go/tools/cmd/staticcheck@v0.8.2
GOTESTSUM     := gotest.tools/gotestsum@v1.13.0
TEST_TIMEOUT  ?= 45m

.PHONY: all build deps deps-test agent run test lint unit clean release release-tools bench bench-smoke bench-report mixin

all: build

# The release binary's build tags. nomsgpack leaves out gin's MessagePack
# codec, which layerprobe never reads or writes: a smaller binary
# (docs/configuration.md, "The agent's memory"). The test hooks are the
# testhooks tag, which the release leaves out. testharness.ReleaseTags must
# agree (TestReleaseBinaryHasNoTestHooks).
GO_TAGS       ?= nomsgpack

# The version lives in VERSION alone; the binary, the release archives, the
# .deb and the image take it from there (`layerprobe --version`).
VERSION       := $(shell cat VERSION)
REVISION      ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)
BUILD_DATE    ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
VERSION_PKG   := github.com/layerprobe/layerprobe/internal/version
LDFLAGS       := -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Revision=$(REVISION) -X $(VERSION_PKG).BuildDate=$(BUILD_DATE)

build:
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(GO_TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/layerprobe

# What the agent needs on the host it measures: fio, and a container engine
# only where none answers.
deps:
	./scripts/install-agent-deps.sh

# The whole test toolchain (daemons, Prometheus, browsers, helm, ...), for
# `make test` and the benchmark only.
deps-test:
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

# Build dashboards/, deploy/prometheus/layerprobe-rules.yml, the
# PrometheusRule and the chart's rules and dashboards from mixin/ (jsonnet,
# evaluated by go-jsonnet). `make test` fails while they differ.
mixin:
	$(GO) -C mixin/gen run . -root $(CURDIR)

# The modules: the product (.), the benchmark (bench, beside the product
# and never in its binary or go.mod), the mixin's generator (mixin/gen,
# which keeps go-jsonnet out of the product's go.mod) and the release's
# image index writer (tools/ociimage).
MODULES       := . bench mixin/gen tools/ociimage

# The build tags the repository's own files use: bench (bench/), race
# (internal/detector, whose !race file the untagged run sees) and testhooks
# (cmd/layerprobe's test hooks). Linting once without and once with them
# checks every file.
LINT_TAGS     := bench,race,testhooks

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	@set -e; for m in $(MODULES); do \
		echo "lint: $$m ($$(date -u +%T))"; \
		$(GO) -C $$m vet ./...; \
		$(GO) -C $$m vet -tags '$(LINT_TAGS)' ./...; \
		$(GO) -C $$m run $(STATICCHECK) ./...; \
		$(GO) -C $$m run $(STATICCHECK) -tags '$(LINT_TAGS)' ./...; \
	done

# Every test: unit tests, and end-to-end tests against private dockerd
# daemons (overlay2, btrfs on a loop file, vfs) with real fio. Needs root.
# End-to-end tests that only need engines of their own are parallel and
# run four at a time after the sequential ones (which include every test
# whose assertions depend on the disk's timing), the longest first: each
# package bounds and orders its own (testharness.Queue), so -parallel is
# only a ceiling that go test's own unordered wake-up never reaches. Three
# packages run at once (-p 3): the end-to-end, operations, fault and VM
# packages each spend much of their time waiting on daemons, cycles and a
# guest, so the long ones overlap instead of queueing behind each other
# on two cores. go test starts packages in the order it is given them
# (TEST_PACKAGES): the longest first, so that the end-to-end package,
# the run's longest, starts at once instead of after the unit packages,
# which fill the slots the shorter long ones free; the Kubernetes package
# (about 2.5 minutes) follows the guest's, before the fault package, so
# that it does not wait for the unit packages at the end. Beside them, in the
# background, lint, then the unit tests of the benchmark's own statistics
# (bench/, build tag bench; `make bench` itself is not part of it) and the
# mixin generator's tests (the checked-in outputs are what it builds):
# their output comes at the end, and a failure there fails the run.
# gotestsum (a tool, never in go.mod) runs go test with go test's own
# output and keeps its JSON events in bin/test.json, from which the tests
# that took a minute or more are listed at the end, pass or fail: where
# the time of a run goes.
# Every package of the module, the longest-running first (make test).
LONG_PACKAGES := ./test/e2e ./test/ops ./test/vm ./test/kube ./test/faults
TEST_PACKAGES  = $(LONG_PACKAGES) $(shell $(GO) list ./... | grep -v -x -F $(foreach p,$(LONG_PACKAGES),-e github.com/layerprobe/layerprobe/$(p:./%=%)))

# SIDE_MAKE is $(MAKE) under another name: a recipe line that names MAKE
# itself runs even under `make -n` (GNU make's rule for recursive makes),
# and this one runs the whole suite.
SIDE_MAKE     := $(MAKE)

test: deps-test
	@echo "test: every package; lint and the benchmark's and the mixin generator's own tests beside them ($$(date -u +%T))"
	@mkdir -p bin
	@status=0; \
	( $(SIDE_MAKE) --no-print-directory lint && \
	  $(GO) -C bench test -race -count=1 -tags bench -run '^TestUnit' . && \
	  $(GO) -C mixin/gen test -count=1 . ) > bin/side.log 2>&1 & side=$$!; \
	$(GO) run $(GOTESTSUM) --format standard-quiet --jsonfile bin/test.json -- \
		-race -timeout $(TEST_TIMEOUT) -count=1 -p 3 -parallel 32 $(TEST_PACKAGES) || status=$$?; \
	echo "test: tests that took a minute or more ($$(date -u +%T))"; \
	$(GO) run $(GOTESTSUM) tool slowest --jsonfile bin/test.json --threshold 60s; \
	echo "test: lint, the benchmark's and the mixin generator's tests ($$(date -u +%T))"; \
	wait $$side || { status=1; echo "test: FAILED: lint, or the benchmark's or the mixin generator's tests (below)"; }; \
	cat bin/side.log; \
	exit $$status

# Unit tests only (no root, no daemons), the benchmark's arithmetic too.
unit:
	$(GO) test -race -short ./...
	$(GO) -C bench test -race -tags bench -run '^TestUnit' .
	$(GO) -C mixin/gen test .

# Benchmarks of layerprobe itself (precision for the bytes written next to
# the earlier method, bias and coverage against a long reference, detection
# power, footprint, a default run on every engine and driver, the shipped
# deployments under load in a cgroup v2 guest): about 7 hours
# on a shared 2-core machine (most of it the default runs and the agent's
# detection cycles) and hundreds of GiB
# written, root, not part of `make test`. BENCH_COVERAGE_RUNS,
# BENCH_OLD_DEFAULT_RUNS, BENCH_REFERENCE_RUNS, BENCH_UNPERTURBED_CYCLES,
# BENCH_FLEET_SIZES (the fleet section's HOSTSxDAYS list, default
# 100x30,1000x30: about an hour on their own) and BENCH_ONLY shrink it.
# BENCH_ONLY=cgroupv2 runs the cgroup v2 guest's pass of this tree's
# commit, BENCH_ONLY=cgroupv2-before the same deployments of
# BENCH_CGROUPV2_BEFORE's for comparison (an hour or more each under TCG). Writes docs/benchmarks.md, docs/bench/*.png
# and docs/bench/results.json (BENCH_OUT moves them). bench-smoke runs every
# section with tiny sizes into a temporary directory; bench-report
# regenerates the page from docs/bench/results.json.
BENCH_OUT     ?= docs
# BENCH_TIMEOUT ends a sitting (the results are written after
# every run); BENCH_RESUME=1 with the same BENCH_ONLY goes on from there.
BENCH_TIMEOUT ?= 18h
BENCH_RUN     := -tags bench -count=1 -v .

# The same binary with the LAYERPROBE_TEST_* hooks (build tag testhooks)
# that the benchmark drives it with; `make build` never has them.
.PHONY: build-testhooks
HOOKS_BIN     := bin/layerprobe-testhooks

build-testhooks:
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(GO_TAGS),testhooks' -o $(HOOKS_BIN) ./cmd/layerprobe

bench: deps-test build-testhooks
	BENCH_OUT=$(abspath $(BENCH_OUT)) LAYERPROBE_BIN=$(abspath $(HOOKS_BIN)) \
		$(GO) -C bench test -run 'TestBench$$' -timeout $(BENCH_TIMEOUT) $(BENCH_RUN)

bench-smoke: deps-test build-testhooks
	BENCH_SHORT=1 LAYERPROBE_BIN=$(abspath $(HOOKS_BIN)) \
		$(GO) -C bench test -run 'TestBench$$' -timeout 60m $(BENCH_RUN)

# The report replays the detector's trials: 5-10 minutes on a 2-core
# machine shared with other work.
bench-report: build-testhooks
	BENCH_OUT=$(abspath $(BENCH_OUT)) LAYERPROBE_BIN=$(abspath $(HOOKS_BIN)) \
		$(GO) -C bench test -run 'TestBenchReport$$' -timeout 30m $(BENCH_RUN)

# Release artifacts in dist/ (version from VERSION): static linux/amd64 and
# linux/arm64 binaries in Prometheus-style archives, SHA256SUMS, a CycloneDX
# SBOM per binary, a .deb per architecture (the binary in /usr/bin, the
# systemd unit, /etc/layerprobe/config.yaml as a conffile, the man page;
# Depends: fio), the agent image for linux/amd64 and linux/arm64 as an OCI
# image layout tarball (an image index; scripts/release-index.sh writes it
# from the static binaries and Debian's fio packages of each architecture,
# with no engine and no arm64 code run), and the agent image for this
# machine's architecture built from the release binary, saved as a
# docker-load tarball. The tools (goreleaser, cyclonedx-gomod) are built from
# the Go module proxy into .build/tools, tools/ociimage from its own module
# there too, all outside layerprobe's go.mod. RELEASE_INDEX=0 skips the
# index (it needs deb.debian.org or a warm package cache); RELEASE_IMAGE=0
# skips the docker-load image (it needs a running engine; its base is made
# with debootstrap unless BASE_IMAGE names a local one).
GORELEASER    := github.com/goreleaser/goreleaser/v2@v2.15.1
CYCLONEDX     := github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0
TOOLS_BIN     := $(CURDIR)/.build/tools
RELEASE_IMAGE ?= 1
RELEASE_INDEX ?= 1
HOST_ARCH     := $(shell $(GO) env GOARCH)

release-tools:
	GOBIN=$(TOOLS_BIN) $(GO) install $(GORELEASER)
	GOBIN=$(TOOLS_BIN) $(GO) install $(CYCLONEDX)

# The release's date is its commit's: the build date in --version and the
# files' times do not depend on when the release was built.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || date +%s)
RELEASE_DATE  := $(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ)

release: build release-tools
	mkdir -p .build
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) scripts/manpage.sh $(BIN) > .build/layerprobe.1
	gzip -9n < .build/layerprobe.1 > .build/layerprobe.1.gz
	PATH="$(TOOLS_BIN):$$PATH" VERSION=$(VERSION) REVISION=$(REVISION) BUILD_DATE=$(RELEASE_DATE) \
		SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(TOOLS_BIN)/goreleaser release --snapshot --clean
ifeq ($(RELEASE_INDEX),1)
	GO=$(GO) SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) scripts/release-index.sh dist layerprobe:$(VERSION) $(VERSION) \
		dist/layerprobe-$(VERSION).oci.tar
	cd dist && sha256sum layerprobe-$(VERSION).oci.tar >> SHA256SUMS
endif
ifeq ($(RELEASE_IMAGE),1)
	scripts/release-image.sh dist/layerprobe_linux_$(HOST_ARCH)_*/layerprobe layerprobe:$(VERSION) \
		dist/layerprobe-$(VERSION).linux-$(HOST_ARCH).image.tar
	cd dist && sha256sum layerprobe-$(VERSION).linux-$(HOST_ARCH).image.tar >> SHA256SUMS
endif

clean:
	rm -rf bin dist .build
