# The project's entry point: `make` lists the targets.

GO          ?= go
# Pinned so that every machine runs the same checks; run through `go run` so
# nothing has to be installed first.
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
TEST_TIMEOUT ?= 15m
# The model checker's package is one CPU-bound explorer per test: 360 s on an
# idle 2-core machine, 801 s beside one busy loop. Its limit is not a timing
# check, so it is set far enough out that load alone never ends the run.
MODEL_TEST_TIMEOUT ?= 30m

# The library and the CLI (cmd/quorumlock) are the root module; the tools
# with heavy dependencies have modules of their own, so that importers of the
# library and users of the CLI do not get them: the chaos suite, the
# benchmark and the protocol's model checker (with its Lua interpreter).
# The driver adapters (docs/drivers.md) are modules of their own too, so
# that the library does not require rueidis or valkey-go.
MODEL_MODULE := redlock/internal/model
TOOL_MODULES := chaos bench
DRIVER_MODULES := redlock/driver/rueidisconn redlock/driver/valkeyconn
MODULES := . $(TOOL_MODULES) $(DRIVER_MODULES) $(MODEL_MODULE)

# What the tests and the chaos suite start or build with: the servers, a C
# compiler for -race and the clock shim, libfaketime for clock jumps, and
# the certificates Go needs to fetch modules.
DEBIAN_PACKAGES := ca-certificates gcc libc6-dev redis-server postgresql etcd-server faketime
# What the chaos suite needs beyond them: ZooKeeper (3.8 in Debian 12, with a
# Java runtime) for the zk-3 topology, and a binding for its logging API.
CHAOS_PACKAGES := zookeeperd libslf4j-java

# $(call each-module,COMMAND) runs COMMAND in every module, stopping at the
# first failure; each-tool-module in the chaos, bench and driver adapter
# modules only (every module but the root and the model checker).
define each-module
	@set -e; for m in $(MODULES); do echo "--- $$m: $(1)"; (cd $$m && $(1)); done
endef

define each-tool-module
	@set -e; for m in $(TOOL_MODULES) $(DRIVER_MODULES); do echo "--- $$m: $(1)"; (cd $$m && $(1)); done
endef

# Modules that must stay out of the root module's graph (docs/design.md, "A
# lean library"): the importable library and the CLI stay lean.
HEAVY_MODULES := ory/dockertest|docker/docker|docker/cli|Shopify/toxiproxy|anishathalye/porcupine|prometheus/|rs/zerolog|go.etcd.io/|google.golang.org/grpc|yuin/gopher-lua
# Packages of the chaos lab that bin/quorumlock must not link.
HEAVY_PACKAGES := etcd|grpc|toxiproxy|porcupine|prometheus

.DEFAULT_GOAL := help
.PHONY: help deps deps-chaos build test test-short stress vet lint lean-check tidy-check model model-known

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

deps: ## Install the Debian packages test and chaos need, if missing (as root, else through sudo)
	@./scripts/install-packages.sh $(DEBIAN_PACKAGES)

deps-chaos: ## Install what `make deps` installs, and ZooKeeper for the chaos suite's zk-3 topology, if missing
	@./scripts/install-packages.sh $(DEBIAN_PACKAGES) $(CHAOS_PACKAGES)

build: bin/quorumlock bin/quorumlock-chaos bin/quorumlock-bench ## Compile every module, and the CLI, the chaos suite and the benchmark into bin/
	$(call each-module,$(GO) build -o /dev/null ./...)

# The model checker's tests are CPU-bound for minutes: they run after the
# root module's packages, not beside the timing-sensitive ones (redlock's
# 10 ms node timeouts missed under that load), and without the race
# detector, which has nothing to find in a one-goroutine explorer and would
# make it four times slower.
test: deps-chaos ## Run every module's tests with the race detector (the model checker without) against real redis-server and PostgreSQL
	@echo "--- .: go test"
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	@echo "--- $(MODEL_MODULE): go test"
	$(GO) -C $(MODEL_MODULE) test -count=1 -timeout $(MODEL_TEST_TIMEOUT) ./...
	$(call each-tool-module,$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...)

# Extra settings for make stress, e.g. `make stress STRESS_RUNS=3 STRESS_PKGS=./redlock/`.
STRESS_RUNS ?= 5
STRESS_PKGS ?=

stress: deps-chaos ## Run the race-tested packages STRESS_RUNS times (5) beside 4 busy loops, and print failures per test
	STRESS_RUNS=$(STRESS_RUNS) ./scripts/stress.sh $(STRESS_PKGS)

test-short: ## Run every module's tests in -short mode, without the race detector (quick feedback)
	$(call each-module,$(GO) test -short -count=1 ./...)

vet: ## go vet every module
	$(call each-module,$(GO) vet ./...)

lint: lean-check docs-check ## gofmt (fails on any unformatted file), then go vet and staticcheck in every module
	@unformatted="$$(gofmt -l .)"; \
	if [ -n "$$unformatted" ]; then \
		echo "gofmt needed on:"; echo "$$unformatted"; exit 1; \
	fi
	$(call each-module,$(GO) vet ./... && $(STATICCHECK) ./...)

lean-check: ## Fail if the root module's graph holds a heavy tool dependency, or bin/quorumlock links the chaos lab or package testing
	@if $(GO) list -m all | grep -E '$(HEAVY_MODULES)'; then \
		echo "the root module must not require the modules above: they belong in chaos/ or bench/"; exit 1; \
	fi
	@n="$$($(GO) list -deps ./cmd/quorumlock | grep -cE '$(HEAVY_PACKAGES)')"; \
	if [ "$$n" -ne 0 ]; then \
		$(GO) list -deps ./cmd/quorumlock | grep -E '$(HEAVY_PACKAGES)'; \
		echo "bin/quorumlock links the $$n packages above: the chaos lab belongs in chaos/cmd/quorumlock-chaos"; exit 1; \
	fi
	@if $(GO) list -deps ./cmd/quorumlock | grep -qx testing; then \
		echo "bin/quorumlock links package testing: non-test code imports internal/testenv instead of internal/servers"; exit 1; \
	fi

tidy-check: ## Fail if any module's go.mod or go.sum is not tidy
	$(call each-module,$(GO) mod tidy -diff)

# Extra flags for the benchmark, e.g. `make bench BENCH_ARGS=--quick`.
BENCH_ARGS ?=
.PHONY: bench bin/quorumlock-bench

# The benchmark's program, bench/cmd/qlbench, for running it by hand.
bin/quorumlock-bench:
	$(GO) -C bench build -o $(CURDIR)/bin/quorumlock-bench ./cmd/qlbench

# The explorer keeps every state it reached: the default run peaked at
# 12 GB of memory for 678,376 states of one scenario, and the fencing
# scenario, one step past its test depth, filled 24 GiB before it finished.
# So the fencing and jump scenarios are left out by default, a scenario
# stops (and the run fails) past 1,500,000 states, and the Go heap is capped.
# MODEL_ARGS='-scenario fencing -max-states N' runs one bounded.
MODEL_ARGS ?= -scenario restart,admit,residual,five,three,clocks,deadline,extend,settings,commit,tokens,bootstrap,bootstrap-pending,identity,reconfig-disjoint,reconfig-bootstrap,reconfig-rerun,reconfig-stale,reconfig-same,reconfig-read,reconfig-done,sets,sets-three,sets-mixed,sets-release -max-states 1500000
MODEL_MEMLIMIT ?= 12GiB

model: ## Run the protocol's model checker (redlock/internal/model) one step deeper than the tests, and print the states it explored
	GOMEMLIMIT=$(MODEL_MEMLIMIT) nice -n 10 $(GO) -C $(MODEL_MODULE) run ./cmd/model $(MODEL_ARGS)

model-known: ## Run the model checker's scenarios with a guard of the protocol taken out: each must find its counterexample
	GOMEMLIMIT=$(MODEL_MEMLIMIT) nice -n 10 $(GO) -C $(MODEL_MODULE) run ./cmd/model -known

bench: deps ## Compare quorumlock with redsync on 5 local redis-server nodes (bench/; BENCH_ARGS=--quick for ~1 min)
	@mkdir -p bench/results
	cd bench && $(GO) run -mod=mod ./cmd/qlbench --json results/bench.json --plot results/bench.svg --markdown results/bench.md $(BENCH_ARGS)
	./scripts/doc-tables.sh

# The docs show the latest measured tables, copied in between markers.
.PHONY: docs-tables docs-check

docs-tables: ## Copy bench/results/bench.md into docs/performance.md, and chaos-report-quick.md (if present) into docs/chaos.md
	./scripts/doc-tables.sh

docs-check: ## Fail on a broken relative link in the README, CONTRIBUTING.md or docs/, or a README example that differs from its test file
	./scripts/check-docs.sh

# Containers (docs/compose.md): images built from Debian's packages, and the
# compose topology of compose/redlock-5.yml.
.PHONY: images up down

images: ## Build quorumlock/{debian-base,redis,postgres} from Debian's packages, offline from any image registry (reuses what exists)
	./images/build.sh

up: ## Start compose/redlock-5.yml (5 primaries, primary+replica, PostgreSQL) and wait until all are healthy
	./compose/stack.sh up

down: ## Remove the compose topology: containers, volumes and network
	./compose/stack.sh down

# Chaos suite (docs/chaos.md): real redis-server and PostgreSQL processes on
# loopback, faults injected on a seeded schedule; nothing is left running.
.PHONY: chaos chaos-full chaos-smoke bin/quorumlock bin/quorumlock-chaos
CHAOS_ARGS ?=

# Phony, so that go's own cache decides whether anything is rebuilt.
bin/quorumlock:
	$(GO) build -o bin/quorumlock ./cmd/quorumlock

# The chaos suite is a binary of its own (chaos/cmd/quorumlock-chaos), so
# that bin/quorumlock links none of its dependencies.
bin/quorumlock-chaos:
	$(GO) -C chaos build -o $(CURDIR)/bin/quorumlock-chaos ./cmd/quorumlock-chaos

chaos: deps-chaos bin/quorumlock-chaos ## Run the quick chaos profile (one scenario per failure row, a few minutes); reports in chaos-report-quick.{json,md,svg}
	./bin/quorumlock-chaos --profile quick --json chaos-report-quick.json --markdown chaos-report-quick.md $(CHAOS_ARGS)

chaos-full: deps bin/quorumlock-chaos ## Run the full chaos profile (8 workers, 10,000 sections, stall sweep, 5 runs each: hours)
	./bin/quorumlock-chaos --profile full --json chaos-report-full.json --markdown chaos-report-full.md $(CHAOS_ARGS)

chaos-smoke: deps bin/quorumlock-chaos ## Run the CI smoke profile (1-2 minutes) and fail unless every verdict holds
	./bin/quorumlock-chaos --profile smoke --json chaos-report-smoke.json $(CHAOS_ARGS)

# The randomized multi-client nemeses (docs/chaos.md, "The nemesis"): the
# nemesis, then the nemesis with reconfiguration, each for SOAK_DURATION
# (one alone: CHAOS_ARGS=--fault=nemesis-reconfig); SOAK_SEED=N reproduces a
# soak (default: random, printed). The table is printed and written to
# soak-report.{json,md}.
SOAK_DURATION ?= 1h
SOAK_SEED ?=
.PHONY: soak

soak: deps bin/quorumlock-chaos ## Run each randomized multi-client nemesis (without and with reconfiguration) for SOAK_DURATION (default 1h; SOAK_SEED=N to reproduce); table in soak-report.{json,md}
	./bin/quorumlock-chaos --profile soak --duration $(SOAK_DURATION) $(if $(SOAK_SEED),--seed $(SOAK_SEED)) --json soak-report.json --markdown soak-report.md $(CHAOS_ARGS)

.PHONY: chaos-compose
chaos-compose: bin/quorumlock-chaos ## Run the chaos smoke profile with every server in a container (needs `make images` or registry access)
	./bin/quorumlock-chaos --backend compose --profile smoke --json chaos-report-compose.json $(CHAOS_ARGS)