# Gatehouse. `make help` lists the targets.
GO ?= go
SHELL := /bin/bash

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

.PHONY: run
run: ensure-postgres ## run the server on 127.0.0.1:8080 (its own PostgreSQL unless DATABASE_URL is set)
	@echo "building gatehouse (the first build downloads and compiles its modules: a minute or two)…"
	@$(GO) build -o bin/gatehouse ./cmd/gatehouse
	bin/gatehouse serve

.PHONY: test
test: ensure-postgres ensure-python ## run every test (race detector on) against a real PostgreSQL
	$(GO) test -race -count=1 ./...

.PHONY: e2e
e2e: ensure-postgres ensure-chromium ## run the browser tests in headless Chromium
	$(GO) test -race -count=1 -tags e2e -run 'Browser' ./...

.PHONY: mcp-clients
mcp-clients: ensure-postgres ensure-npm ensure-chromium ## the official TypeScript MCP client (two instances behind a round-robin balancer, OAuth through the consent page in Chromium), the MCP conformance suite, the TypeScript gate() client, the LangGraph and the OpenAI Agents SDK examples, against a real server
	cd web/testdata/node && npm ci --no-audit --no-fund --loglevel=error
	cd clients/typescript && npm ci --no-audit --no-fund --loglevel=error && npm run --silent typecheck
	cd examples/langgraph && npm ci --no-audit --no-fund --loglevel=error
	cd examples/openai-agents && npm ci --no-audit --no-fund --loglevel=error
	$(GO) test -race -count=1 -tags node -run 'Node' ./web/

.PHONY: screenshots
screenshots: ensure-postgres ensure-chromium ## PNGs of the main pages (seeded data, light and dark theme) into docs/screenshots
	GATEHOUSE_SCREENSHOTS=$(CURDIR)/docs/screenshots $(GO) test -count=1 -tags e2e -run 'TestBrowser_Screenshots$$' -v ./cmd/gatehouse

.PHONY: soak
soak: ensure-postgres ## crash suite: SIGKILL a real server during concurrent tool calls, then check (SOAK_ROUNDS=5 SOAK_CONCURRENCY=200)
	$(GO) test -tags soak -run Soak -count=1 -v -timeout 30m ./cmd/gatehouse

.PHONY: bench
bench: ensure-postgres ensure-pgbench ## the gate against pgbench's one-row INSERT on one cluster, and the pure parts; writes docs/performance.md (BENCH_DURATION=10s, BENCH_VOLUME=1000000 adds the pages at volume; see it)
	bash .ci/bench

.PHONY: bench-go
bench-go: ensure-postgres ## every Go benchmark, 6 times (for benchstat)
	$(GO) test -run '^$$' -bench . -benchmem -count 6 ./...

.PHONY: load
load: ensure-postgres ## drive a throwaway server at a constant rate (RATE=50 DURATION=10s) and report latencies against a baseline
	bash .ci/load

# Every native fuzz target, one after the other (go test -fuzz takes one
# target at a time). FUZZTIME is a duration (30s) or a count of inputs
# (3000x, what CI runs). A crasher is written to the package's
# testdata/fuzz and becomes a regression case.
FUZZTIME ?= 30s
.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME each (default 30s; CI runs FUZZTIME=3000x)
	@set -e; for dir in $$(grep -rl --include='*_test.go' '^func Fuzz' cmd internal web | xargs -n1 dirname | sort -u); do \
		for target in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go | sed 's/^func //'); do \
			echo "fuzz ./$$dir $$target ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) ./$$dir; \
		done; \
	done

.PHONY: build
build: ## build bin/gatehouse
	$(GO) build -o bin/gatehouse ./cmd/gatehouse

.PHONY: generate
generate: ## regenerate sqlc, templ and the REST client (web/client from web/openapi.yaml)
	$(GO) tool sqlc generate
	$(GO) tool templ generate
	$(GO) tool oapi-codegen -config web/client.cfg.yaml web/openapi.yaml

.PHONY: check-generated
check-generated: generate ## fail when generated code is not what the sources produce
	@if [ -n "$$(git status --porcelain -- db views web/client)" ]; then \
		echo "generated code is stale; run 'make generate' and commit:"; git status --short -- db views web/client; exit 1; fi

.PHONY: lint
lint: check-secrets ## go vet (with and without the e2e tag), gofmt, and no committed private key
	$(GO) vet ./...
	$(GO) vet -tags e2e ./...
	@bad=$$(gofmt -l $$(git ls-files '*.go' | grep -v '_templ.go$$')); \
		if [ -n "$$bad" ]; then echo "gofmt wants to change:"; echo "$$bad"; exit 1; fi

# A PEM private key block (PKCS#8, RSA, EC, OpenSSH, encrypted…) in any
# tracked file: its header on a line of its own. Test code that builds a
# key spells the header inside a string, so it does not match.
.PHONY: check-secrets
check-secrets: ## fail when a tracked file holds a private key
	@found=$$(git grep -lE -e '^[[:space:]]*-----BEGIN ([A-Z0-9]+ )*PRIVATE KEY( BLOCK)?-----[[:space:]]*$$' -- . || true); \
		if [ -n "$$found" ]; then echo "a private key is committed (remove it from the tree and rotate it):"; echo "$$found"; exit 1; fi

# PostgreSQL's server binaries run the embedded default and the tests. As
# root, install Debian's package when they are missing.
.PHONY: ensure-postgres
ensure-postgres:
	@if [ -z "$$DATABASE_URL" ] && ! command -v pg_ctl >/dev/null && ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing PostgreSQL (Debian package postgresql)"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
		else \
			echo "PostgreSQL's server binaries are missing: install the postgresql package (sudo apt-get install postgresql) or set DATABASE_URL"; exit 1; \
		fi; \
	fi

# pgbench, for make bench's baseline: Debian ships it in postgresql-<version>
# (older releases in postgresql-contrib). As root, install them when it is
# missing.
PGBENCH_FOUND = [ -x "$$(pg_config --bindir 2>/dev/null)/pgbench" ] || ls /usr/lib/postgresql/*/bin/pgbench >/dev/null 2>&1
.PHONY: ensure-pgbench
ensure-pgbench:
	@if ! { $(PGBENCH_FOUND); }; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing pgbench (Debian packages postgresql and postgresql-contrib)"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql postgresql-contrib >/dev/null; \
		else \
			echo "pgbench is missing: install PostgreSQL's server package (sudo apt-get install postgresql postgresql-contrib)"; exit 1; \
		fi; \
	fi

# Python 3 runs docs/verify_receipts.py, the independent receipt verifier,
# in its test (web). As root, install Debian's python3 when it is missing:
# python3-minimal alone lacks the json module the script needs. Otherwise
# the test is skipped, unless GATEHOUSE_TEST_REQUIRE_PYTHON is set (CI).
.PHONY: ensure-python
ensure-python:
	@if ! python3 -c 'import json, hashlib' >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing Python 3 (Debian package python3)"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 >/dev/null; \
		else \
			echo "python3 is missing: the test of docs/verify_receipts.py is skipped (sudo apt-get install python3)"; \
		fi; \
	fi

# npm installs the pinned Node.js (22, the `node` package) the MCP clients
# and the conformance suite run on; any npm will do to install it.
.PHONY: ensure-npm
ensure-npm:
	@if ! command -v npm >/dev/null; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing npm (Debian package npm)"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null; \
		else \
			echo "npm is missing: install Debian's npm package (sudo apt-get install npm)"; exit 1; \
		fi; \
	fi

.PHONY: ensure-chromium
ensure-chromium:
	@if ! command -v chromium >/dev/null; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing Chromium (Debian package chromium)"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
		else \
			echo "Chromium is missing: install Debian's chromium package (sudo apt-get install chromium)"; exit 1; \
		fi; \
	fi
