# The project's entry point: `make` lists the targets.

GO          ?= go
# Pinned so that every machine runs the same checks; run through `go run` so
# nothing has to be installed first.
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
TEST_TIMEOUT ?= 15m

.DEFAULT_GOAL := help
.PHONY: help build test test-short lint tidy-check

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## Compile every package, and bin/quorumlock once cmd/quorumlock has a main package
	$(GO) build ./...
	@if [ "$$($(GO) list -f '{{.Name}}' ./cmd/quorumlock 2>/dev/null)" = main ]; then \
		echo "$(GO) build -o bin/quorumlock ./cmd/quorumlock"; \
		$(GO) build -o bin/quorumlock ./cmd/quorumlock; \
	else \
		echo "cmd/quorumlock has no main package yet; skipping bin/quorumlock"; \
	fi

test: ## Run all tests with the race detector against real redis-server and PostgreSQL
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

test-short: ## Run the tests in -short mode, without the race detector (quick feedback)
	$(GO) test -short -count=1 ./...

lint: ## gofmt (fails on any unformatted file), go vet and staticcheck
	@unformatted="$$(gofmt -l .)"; \
	if [ -n "$$unformatted" ]; then \
		echo "gofmt needed on:"; echo "$$unformatted"; exit 1; \
	fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

tidy-check: ## Fail if go.mod or go.sum are not tidy
	$(GO) mod tidy -diff

# Extra flags for the benchmark, e.g. `make bench BENCH_ARGS=--quick`.
BENCH_ARGS ?=
.PHONY: bench

bench: ## Compare quorumlock with redsync on 5 local redis-server nodes (bench/; BENCH_ARGS=--quick for ~1 min)
	@mkdir -p bench/results
	cd bench && $(GO) run -mod=mod ./cmd/qlbench --json results/bench.json --plot results/bench.svg --markdown results/bench.md $(BENCH_ARGS)

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
.PHONY: chaos chaos-full chaos-smoke
CHAOS_ARGS ?=

chaos: ## Run the quick chaos profile (one scenario per failure row, a few minutes); reports in chaos-report-quick.{json,md,svg}
	$(GO) build -o bin/quorumlock ./cmd/quorumlock
	./bin/quorumlock chaos --profile quick --json chaos-report-quick.json --markdown chaos-report-quick.md $(CHAOS_ARGS)

chaos-full: ## Run the full chaos profile (8 workers, 10,000 sections, stall sweep, 5 runs each: hours)
	$(GO) build -o bin/quorumlock ./cmd/quorumlock
	./bin/quorumlock chaos --profile full --json chaos-report-full.json --markdown chaos-report-full.md $(CHAOS_ARGS)

chaos-smoke: ## Run the CI smoke profile (1-2 minutes) and fail unless every verdict holds
	$(GO) build -o bin/quorumlock ./cmd/quorumlock
	./bin/quorumlock chaos --profile smoke --json chaos-report-smoke.json $(CHAOS_ARGS)

.PHONY: chaos-compose
chaos-compose: ## Run the chaos smoke profile with every server in a container (needs `make images` or registry access)
	$(GO) build -o bin/quorumlock ./cmd/quorumlock
	./bin/quorumlock chaos --backend compose --profile smoke --json chaos-report-compose.json $(CHAOS_ARGS)