# seckill — make run | test | bench | lint | build | deps | clean
#
#   make run    installs what is missing, builds, starts `seckill dev`
#   make check  make lint and every package's tests but the fault suite,
#               without -race and with -short (no long e2e: the tests that
#               call testenv.Long), for day-to-day work; under 3 minutes
#               (2 min 22 s with warm caches on two quiet cores, lint included)
#   make test   make lint (go vet, gofmt, staticcheck), the alert rule tests, race
#               tests against one shared MariaDB, every fault scenario of
#               e2e/chaos (the fleet and the failover tests among them:
#               about 1.5 of its 8 minutes here), the 60-second soak, short
#               fuzz runs (what CI runs)
#   make bench  Go micro-benchmarks (benchstat against the last run), then the
#               wrk load harness in bench/harness (see bench/README.md)
#   make fleet  the production shape on loopback (e2e/chaos TestFleet: a Redis
#               Cluster, hot shards, three edges, three consumers, a master
#               failover, a 200,000-unit SKU over 4 buckets), verbose; make
#               chaos and make test run it too (with 2,000 units)
#   make soak   the long sale: bench/soak, 10 minutes, fails on memory growth
#               (make test runs a 60-second version, make soak-short)
#   make mutate the mutation check: plants each bug of scripts/mutations/ and
#               shows the tests catch it (docs/testing.md); not in make test

GO ?= go
# A fresh shell may not have the toolchain on PATH yet.
ifeq ($(shell command -v $(GO) 2>/dev/null),)
export PATH := /usr/local/go/bin:$(PATH)
endif

SHELL     := /bin/bash
BIN       := bin/seckill
# Fuzz budgets are counts, not durations: with a duration, Go 1.26's fuzz
# coordinator can fail a target with a bare "context deadline exceeded" at
# the deadline on a loaded machine (golang/go#75804, fixed in Go 1.27); a
# count has no deadline to race. 100000 runs take 4-10 s a target here.
FUZZTIME  ?= 100000x
TESTFLAGS ?= -race -count=1 -timeout 12m
# The fault-injection suite runs alone, after the other packages, so its
# paced crowds and fault schedules do not share the two cores with other
# test binaries; its processes are built with -race by the suite itself.
CHAOSFLAGS ?= -race -count=1 -timeout 25m
CHAOSPKG   := ./e2e/chaos/
CHAOSHEAD  := | scenario | sent | accepted | accepted after | orders | stock left | held | took | invariants |\n|---|---:|---:|---:|---:|---|---:|---:|---|

.PHONY: all deps build run test check bench lint clean chaos chaos-run fleet mutate soak soak-short soak-run

all: build

deps:
	@scripts/deps.sh

build:
	$(GO) build -o $(BIN) ./cmd/seckill

run: deps build
	./$(BIN) dev --config configs/dev.yaml

# One MariaDB serves every package's tests (testenv reads
# SECKILL_TEST_MYSQL_DSN). The trap stops it by PID whatever happens to the
# tests, and the recipe exits with the tests' status. Every package but the
# fault suite first, then the fault suite (every scenario), then the fuzz
# targets.
test:
	@scripts/deps.sh --test
	@set -u -o pipefail; t0=$$(date +%s); \
	state=$$(mktemp "$${TMPDIR:-/tmp}/seckill-make-test.XXXXXX"); \
	table=$$(mktemp "$${TMPDIR:-/tmp}/seckill-chaos-table.XXXXXX"); \
	export SECKILL_MARIADB_STATE=$$state; \
	trap 'scripts/mariadb-test.sh stop; rm -f "$$state" "$$table"' EXIT; \
	trap 'exit 130' INT TERM; \
	dsn=$$(scripts/mariadb-test.sh start) || exit 1; \
	export SECKILL_TEST_MYSQL_DSN=$$dsn; \
	echo "== MariaDB for tests: $$dsn"; \
	echo "== make lint (go vet, gofmt -l, staticcheck)"; \
	$(MAKE) --no-print-directory lint || exit $$?; \
	scripts/promtool-test.sh || exit $$?; \
	pkgs=$$($(GO) list ./... | grep -v '/e2e/chaos$$') || exit $$?; \
	echo "== go test $(TESTFLAGS) ./... (all but $(CHAOSPKG))"; \
	$(GO) test $(TESTFLAGS) $$pkgs || exit $$?; \
	echo "== cd deploy && go test $(TESTFLAGS) ./... (the manifest tests, a module of their own)"; \
	(cd deploy && $(GO) test $(TESTFLAGS) ./...) || exit $$?; \
	echo "== go test -count=1 -run NotAllocate (allocation counts, without -race: it drops sync.Pool items)"; \
	$(GO) test -count=1 -run 'NotAllocate' ./edge ./internal/identity ./internal/ratelimit ./sale || exit $$?; \
	echo "== go test $(CHAOSFLAGS) $(CHAOSPKG) (every fault scenario, make chaos for the table)"; \
	start=$$(date +%s); \
	SECKILL_CHAOS_TABLE=$$table $(GO) test $(CHAOSFLAGS) $(CHAOSPKG); status=$$?; \
	echo "== fault suite: $$(( $$(date +%s) - start ))s, one line per scenario:"; \
	printf '$(CHAOSHEAD)\n'; cat "$$table"; \
	[ $$status -eq 0 ] || exit $$status; \
	echo "== make soak-short (bench/soak $(SOAKSHORT): fails when a process's memory grows)"; \
	$(MAKE) --no-print-directory soak-run SOAKFLAGS='$(SOAKSHORT) -out $(SOAKOUT)-short' || exit $$?; \
	targets=$$($(GO) test -vet=off -list '^Fuzz' ./... | \
		awk '/^Fuzz/ { n[++c] = $$1; next } /^ok / { for (i = 1; i <= c; i++) print $$2 "," n[i]; c = 0 }') || exit $$?; \
	for t in $$targets; do \
		pkg=$${t%%,*}; name=$${t#*,}; \
		echo "== fuzz $$pkg $$name ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) "$$pkg" || exit $$?; \
	done; \
	echo "== make test: all passed in $$(( $$(date +%s) - t0 ))s"

# The day-to-day check: the lint and every package's tests but the fault
# suite, without -race (which is what makes make test slow) and with -short
# (the long e2e tests — whole processes, the browser, large crowds — mark
# themselves with testenv.Long and are skipped; a few scale a crowd down),
# against one throwaway MariaDB; make test is what CI runs.
CHECKFLAGS ?= -short -count=1 -timeout 10m
check:
	@scripts/deps.sh --test
	@set -u -o pipefail; t0=$$(date +%s); \
	state=$$(mktemp "$${TMPDIR:-/tmp}/seckill-make-check.XXXXXX"); \
	export SECKILL_MARIADB_STATE=$$state; \
	trap 'scripts/mariadb-test.sh stop; rm -f "$$state"' EXIT; \
	trap 'exit 130' INT TERM; \
	dsn=$$(scripts/mariadb-test.sh start) || exit 1; \
	export SECKILL_TEST_MYSQL_DSN=$$dsn; \
	$(MAKE) --no-print-directory lint || exit $$?; \
	pkgs=$$($(GO) list ./... | grep -v '/e2e/chaos$$') || exit $$?; \
	$(GO) test $(CHECKFLAGS) $$pkgs || exit $$?; \
	(cd deploy && $(GO) test $(CHECKFLAGS) ./...) || exit $$?; \
	echo "== make check: all passed in $$(( $$(date +%s) - t0 ))s"

# The fault-injection suite (e2e/chaos, DESIGN §8) — the same run make test
# does, verbose — on real processes and one throwaway MariaDB; then one line
# per scenario. CHAOS_RUN narrows it to a go test -run pattern.
CHAOS_RUN ?= .
chaos:
	@scripts/deps.sh
	@$(MAKE) --no-print-directory chaos-run

# chaos-run: make chaos without the install step (make fleet installs with
# --test first).
chaos-run:
	@set -u -o pipefail; \
	state=$$(mktemp "$${TMPDIR:-/tmp}/seckill-make-chaos.XXXXXX"); \
	table=$$(mktemp "$${TMPDIR:-/tmp}/seckill-chaos-table.XXXXXX"); \
	export SECKILL_MARIADB_STATE=$$state; \
	trap 'scripts/mariadb-test.sh stop; rm -f "$$state" "$$table"' EXIT; \
	trap 'exit 130' INT TERM; \
	dsn=$$(scripts/mariadb-test.sh start) || exit 1; \
	export SECKILL_TEST_MYSQL_DSN=$$dsn SECKILL_CHAOS_TABLE=$$table SECKILL_RESTART_TICKETS=$${SECKILL_RESTART_TICKETS:-250000}; \
	echo "== go test $(CHAOSFLAGS) -v -run '$(CHAOS_RUN)' $(CHAOSPKG)"; \
	$(GO) test $(CHAOSFLAGS) -v -run '$(CHAOS_RUN)' $(CHAOSPKG); status=$$?; \
	echo; echo "== fault suite (-run '$(CHAOS_RUN)'), $$(date -u '+%Y-%m-%d %H:%M UTC'): one line per scenario"; \
	printf '$(CHAOSHEAD)\n'; cat "$$table"; \
	exit $$status

# The long sale (bench/soak, docs in its package comment): `seckill dev`
# under wrk at full speed on 127.0.0.1 with distinct buyers and a restock
# every tenth of the run (every minute of ten); it samples every process's
# RSS, descriptors and threads, each Redis's memory, the data directory and
# the edge's size gauges, writes soak.csv, soak.png and two heap profiles
# into the out directory, and fails when seckill's RSS grows more than 10%
# from two tenths of the run to its end or any process's RSS passes twice
# its median (after minute 2 of 10, and the books checked in the real
# stores once every ticket is an order). make soak runs the 10 minutes;
# make test runs soak-short, alone after the fault suite: 60 seconds
# judged after 50 of warm-up (RSS follows the highest GC goal so far, and
# the goal varies by a few percent with the work in flight: it reaches its
# plateau in about 50 s), about 2.5 minutes with the build, the start and
# the drain. Every process it starts is stopped by its PID.
SOAKOUT   ?= bench/out/soak
SOAKSHORT ?= -duration 110s -warmup 50s
SOAKFLAGS ?= -out $(SOAKOUT)
soak:
	@scripts/deps.sh --test
	@$(MAKE) --no-print-directory soak-run

soak-short:
	@scripts/deps.sh --test
	@$(MAKE) --no-print-directory soak-run SOAKFLAGS='$(SOAKSHORT) -out $(SOAKOUT)-short'

soak-run:
	$(GO) run ./bench/soak $(SOAKFLAGS)

# The fleet: e2e/chaos TestFleet alone, verbose — a Redis Cluster
# of 3 masters + 3 replicas, hot-SKU shards, the broker, MariaDB, three
# edges (one with a sidecar engine), three consumers of one group; members
# join, leave, die and restart and a cluster master fails over during a
# sale; then the chaos checker's invariants. About 75 s here plus the
# -race build (~20 s cold); make chaos and make test run it with the other
# scenarios (it fits: the whole fault suite took 8 min with it; make test stays
# well inside its 30-minute budget).
#
# It also sells a SKU split into 4 buckets pinned on the two hot shards
# (activity 2) to the last unit during the failover: 2,000 units in make
# chaos and make test, FLEET_BUCKET_UNITS (200,000) here, which also makes
# the run minutes long.
FLEET_BUCKET_UNITS ?= 200000
fleet:
	@scripts/deps.sh --test
	@SECKILL_FLEET_BUCKET_UNITS=$(FLEET_BUCKET_UNITS) $(MAKE) --no-print-directory chaos-run CHAOS_RUN='^TestFleet$$'

# The mutation check (docs/testing.md): plants each bug of
# scripts/mutations/*.patch, one at a time, in a scratch copy of HEAD (never
# this tree), runs the patch's tests to the first failure and prints one
# table; fails if a bug survives, a patch no longer applies or a catching
# test fails without its bug. Not in make test (minutes). MUTATE_FLAGS passes
# flags to scripts/mutate, e.g. MUTATE_FLAGS='-run occupy' or "-flags -race".
MUTATE_FLAGS ?=
mutate:
	@scripts/deps.sh --test
	$(GO) run ./scripts/mutate $(MUTATE_FLAGS)

# make bench: Go micro-benchmarks (-benchmem, $(BENCHCOUNT) runs each) into
# $(BENCHOUT)/go-bench.txt, compared with the previous run's file by benchstat
# (installed on first use), then the wrk load harness (bench/harness: builds
# and starts the system and its references on 127.0.0.1, prints one table,
# stops everything it started). HARNESSFLAGS passes flags to the harness,
# e.g. HARNESSFLAGS='-d 5s -bigc 0'.
BENCHOUT     ?= bench/out
BENCHCOUNT   ?= 6
BENCHTIME    ?= 1s
HARNESSFLAGS ?=

bench: deps
	@set -u -o pipefail; mkdir -p $(BENCHOUT); \
	new=$(BENCHOUT)/go-bench.txt; old=$(BENCHOUT)/go-bench.prev.txt; \
	if [ -s $$new ]; then mv $$new $$old; fi; \
	echo "== go test -bench . -benchmem -count $(BENCHCOUNT) ./... > $$new"; \
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(BENCHCOUNT) ./... | tee $$new || exit $$?; \
	if [ -s $$old ]; then \
		bs=$$(command -v benchstat || echo "$$($(GO) env GOPATH)/bin/benchstat"); \
		if [ ! -x "$$bs" ]; then \
			echo "== installing benchstat"; \
			$(GO) install golang.org/x/perf/cmd/benchstat@latest || exit $$?; \
		fi; \
		echo "== benchstat $$old $$new"; \
		"$$bs" $$old $$new || exit $$?; \
	else \
		echo "== no previous $$old: benchstat compares from the next make bench on"; \
	fi; \
	echo "== load harness: go run ./bench/harness -out $(BENCHOUT) $(HARNESSFLAGS)"; \
	$(GO) run ./bench/harness -out $(BENCHOUT) $(HARNESSFLAGS)

# staticcheck is pinned: a new release may add checks (or need a newer Go)
# and turn a green tree red without a change here. v0.8.2 (2026.2.2) runs
# on Go 1.26.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

# deploy/ is a module of its own (the manifest tests and k8s.io/api): ./...
# of the root does not reach it, so each step runs there too.
lint:
	$(GO) vet ./...
	@scripts/subjects.sh
	cd deploy && $(GO) vet ./...
	@out=$$(gofmt -l .); \
	if [ -n "$$out" ]; then echo "gofmt -l: these files need gofmt:"; echo "$$out"; exit 1; fi
	@if $(GO) run $(STATICCHECK) -version >/dev/null 2>&1; then \
		echo "$(GO) run $(STATICCHECK) ./..."; \
		$(GO) run $(STATICCHECK) ./... && \
		(cd deploy && $(GO) run $(STATICCHECK) ./...); \
	else \
		echo "lint: staticcheck is not installable here (no module proxy?); skipped"; \
	fi

clean:
	rm -rf bin
