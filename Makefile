# The BFF's developer commands. Everything needs Go only, except `make run`'s
# example web app (Node.js; without it the BFF runs with no app at /), and
# `make test` and `make chaos`, which need a Redis (a throwaway redis-server
# is started when none answers), a PostgreSQL (the local cluster is started
# when it does not answer), Node.js, HAProxy and Chromium. `make test-unit`
# needs Go only.
GO       ?= go
BIN      := bin
PORT     ?= 8080
APP      ?= web/app
PKGS     := ./...
# The Go tests that need Redis, PostgreSQL, Node.js, HAProxy or Chromium
# (the e2e package, and the files that use internal/testing/redistest,
# pgtest or browsertest) are built only with this tag: `make test` sets it
# and they fail, never skip, without what they need; `make test-unit`
# leaves it out, so they are not compiled and nothing reports them passed.
TAGS     := integration

.PHONY: all build run test test-unit test-deps test-client client-pack test-chart manifests lint bench bench-payments bench-streams bench-dpop bench-login bench-micro chaos fuzz check-config clean mutants

all: lint test

# Static binaries; deploy/Dockerfile runs this same target.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags="-s -w" -o $(BIN)/bff ./cmd/bff
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags="-s -w" -o $(BIN)/upstream-sim ./cmd/upstream-sim

## run: the BFF with its local upstream simulator, dev login, in-process store,
## and the example web app (web/app, built with npm) at http://localhost:8080;
## PORT=3000 moves it (and the admin port, the simulator and its allow-list);
## APP=web/react-app serves the React example instead; AUTH=oidc signs in at
## the e2e tests' OpenID provider (Node.js, on PORT + 2) with payments the user
## approves there, AUTH=fapi2 the same with the FAPI 2.0 profile (PAR,
## private_key_jwt, DPoP)
run: build
	PORT=$(PORT) RUN_APP=$(APP) RUN_AUTH=$(or $(AUTH),dev) ./scripts/run-dev.sh

## test: the whole suite with the race detector, on a real Redis, a real
## PostgreSQL, HAProxy, headless Chromium and a real OpenID provider
## (oidc-provider on Node.js);
## its fault-injection run is 15 s long (make chaos runs it longer);
## then the TypeScript client's tests and the check that its generated
## types match api/openapi.yaml, then the Helm chart's checks
## Every suite runs even when one before it failed, and the run ends with
## the list of those that failed (and a non-zero exit), so one failure never
## hides another.
test: test-deps
	@failed=""; \
	./scripts/with-postgres.sh ./scripts/with-redis.sh $(GO) test -race -count=1 -timeout 20m -tags $(TAGS) $(PKGS) || failed="$$failed go-tests"; \
	$(MAKE) test-client || failed="$$failed test-client"; \
	$(MAKE) test-chart || failed="$$failed test-chart"; \
	if [ -n "$$failed" ]; then echo "make test: FAILED:$$failed" >&2; exit 1; fi; \
	echo "make test: every suite passed"

## test-unit: the Go tests that need Go only, with the race detector: no
## Redis, PostgreSQL, Node.js, HAProxy or Chromium (the files tagged
## integration are left out, see TAGS); on 2 cores 1.5 minutes with a warm
## build cache, 4.6 from a clean clone (README.md)
test-unit:
	$(GO) test -race -count=1 -timeout 10m $(PKGS)

## test-chart: the Helm chart (deploy/helm/bff) without a cluster: helm lint,
## helm template with the default and the production values, every rendered
## object validated as the API server would, the plain manifests of
## deploy/kubernetes equal to the chart's rendering (a module of its own:
## deploy/helm/chartcheck). Without -race: the checks start no goroutine, and
## the race detector's build of Kubernetes' packages alone takes 5 minutes.
test-chart:
	cd deploy/helm/chartcheck && GO=$(GO) $(GO) test -count=1 -timeout 10m ./...

## manifests: render deploy/kubernetes from the Helm chart
manifests:
	cd deploy/helm/chartcheck && $(GO) test -count=1 -run '^TestPlainManifestsAreTheChart$$' ./... -update

## test-client: the TypeScript client (web/client): unit tests on Node's
## test runner; its package packed, installed in a new project outside the
## repository, and programs compiled against it (one must compile and run,
## test/types-must-fail/ must not); its generated types checked against
## api/openapi.yaml
test-client:
	npm ci --prefix web/client --no-audit --no-fund
	npm test --prefix web/client
	npm run check-gen --prefix web/client

## client-pack: the TypeScript client as the versioned tarball a team installs,
## bin/fintech-bff-client-<version>.tgz (npm pack: its prepack builds dist/
## afresh); web/client/README.md, "Install", says how to install or publish it
client-pack:
	@./scripts/check-node.sh
	npm ci --prefix web/client --no-audit --no-fund
	mkdir -p $(BIN)
	cd web/client && npm pack --pack-destination $(CURDIR)/$(BIN)

test-deps:
	@./scripts/check-node.sh
	@command -v haproxy >/dev/null 2>&1 || { echo "HAProxy is needed for the load-balancer tests: apt-get install -y haproxy" >&2; exit 1; }
	@command -v chromium >/dev/null 2>&1 || { echo "Chromium is needed for the browser tests (the example app, the consent pages): apt-get install -y chromium" >&2; exit 1; }
	@[ -d e2e/oidcprovider/node_modules/oidc-provider ] || npm ci --prefix e2e/oidcprovider --no-audit --no-fund
	@[ -d web/app/node_modules/esbuild ] || npm ci --prefix web/app --no-audit --no-fund
	@[ -d web/react-app/node_modules/react-dom ] || npm ci --prefix web/react-app --no-audit --no-fund
	@[ -d web/client/node_modules/typescript ] || npm ci --prefix web/client --no-audit --no-fund

## lint: gofmt, go vet and staticcheck, with TAGS so that the tests that
## need services are checked too
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags $(TAGS) $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 -tags $(TAGS) $(PKGS)
	cd deploy/helm/chartcheck && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

## bench: the end-to-end load benchmark (BFF against a bare ReverseProxy, wrk);
## writes BENCHMARKS.md and bench/latency.svg. BENCHFLAGS passes flags to it.
## Then bench-payments (its section of BENCHMARKS.md, which the full run
## keeps as it stands), bench-streams and bench-dpop.
bench: build
	@command -v wrk >/dev/null 2>&1 || apt-get install -y wrk || { apt-get update && apt-get install -y wrk; }
	CGO_ENABLED=0 $(GO) build -o $(BIN)/bffbench ./bench
	./scripts/with-redis.sh ./$(BIN)/bffbench -bff $(BIN)/bff -out BENCHMARKS.md -svg bench/latency.svg $(BENCHFLAGS)
	$(MAKE) bench-payments
	$(MAKE) bench-streams
	$(MAKE) bench-dpop
	$(MAKE) bench-login

## bench-login: what pushed authorization requests cost a login: 200
## logins each through the front channel, PAR offered (client secret) and
## the fapi2 profile (PAR, private_key_jwt, DPoP) against the local OpenID
## provider, with a product (non-race) build of the BFF; the time of
## GET /auth/login and of the callback, p50 and p90, to bench/login-par.txt
bench-login: test-deps
	BFF_E2E_PRODUCT_BUILD=1 ./scripts/with-postgres.sh ./scripts/with-redis.sh $(GO) test -tags $(TAGS) -count=1 -timeout 10m \
	  -run '^TestLoginThroughEachFrontChannel$$' ./e2e -args -login-rounds 200 -login-out $(CURDIR)/bench/login-par.txt
	cat bench/login-par.txt

## bench-payments: keyed payment creations through one BFF with the
## PostgreSQL ledger (a fresh database, dropped after) and Redis, against
## the bare proxy's plain POST, in one run: payments/s at saturation, then
## p50/p99/p99.9 at 25, 50 and 90% of it, CPU, ledger transactions and
## Redis commands per payment, and the same for a repeat of a key; a CPU
## profile of the BFF at saturation. About 3 minutes. Replaces the payments
## section of BENCHMARKS.md (the rest stays as make bench wrote it); every
## run and the profile go to bench/payments.txt. PAYFLAGS passes flags.
bench-payments: build
	@command -v wrk >/dev/null 2>&1 || apt-get install -y wrk || { apt-get update && apt-get install -y wrk; }
	CGO_ENABLED=0 $(GO) build -o $(BIN)/bffbench ./bench
	./scripts/with-postgres.sh ./scripts/with-redis.sh ./$(BIN)/bffbench -bff $(BIN)/bff -only payments -profile payments \
	  -out BENCHMARKS.md -pay-out bench/payments.txt $(PAYFLAGS)

## bench-dpop: a device-bound (DPoP) session's request against a Bearer one
## and the cookie path, in one run (CPU, time, allocations and Redis
## commands per request, medians of 5 interleaved rounds, ratios to Bearer);
## the figures go to bench/dpop.txt.
bench-dpop:
	GO=$(GO) TAGS=$(TAGS) ./scripts/with-redis.sh ./scripts/bench-dpop.sh

## bench-streams: 10,000 idle event streams on one edge (memory, objects
## and goroutines per stream, CPU at rest), and the steady-state GET without
## them, with them, and with 10,000 plain idle sockets instead, in one run;
## the figures go to bench/streams.txt.
bench-streams:
	./scripts/with-redis.sh sh -c '$(GO) test -tags $(TAGS) -run="^$$" -bench="^BenchmarkIdleStreams$$" -benchtime=1x -count=1 ./internal/edge/ && \
	  $(GO) test -tags $(TAGS) -run="^$$" -bench="SteadyStateRequest$$|SteadyStateRequestWithIdle" -benchtime=30000x -count=5 ./internal/edge/' | tee bench/streams.txt

## bench-micro: the Go micro-benchmarks on a real Redis and PostgreSQL
bench-micro:
	./scripts/with-postgres.sh ./scripts/with-redis.sh $(GO) test -tags $(TAGS) -run='^$$' -bench=. -benchmem -count=1 $(PKGS)

## chaos: the payments fault-injection run, long: three instances behind
## HAProxy, CHAOS_USERS clients for CHAOS_DURATION while instances are killed
## and frozen, Redis restarts empty and the upstream drops answers. It fails
## on any payment made twice; the figures go to bench/chaos.txt. Before it,
## the ledger's database faults (internal/ledger/faults_test.go): a restart,
## a LEDGER_PAUSE freeze, a failover to a synchronous standby, and the claims
## a lagging asynchronous standby loses; their figures go to
## bench/ledger-faults.txt (make test runs them with a 2 s freeze). And
## revocation on three instances with 1,000 sessions (make test: 150).
## Then the payment history checker (e2e/history_test.go) for HISTORY_OPS
## operations (make test: 240): the histories explored and the invariants
## held go to bench/histories.txt. The hold checker (payments the user
## approves, internal/payments) runs HOLD_OPS operations per history (make
## test: 300) into bench/holds.txt. Last, the ledger's database frozen for
## LEDGER_PAUSE under PAUSE_RATE payments a second from retrying clients on
## three instances (e2e/ledgerpause_test.go; make test: 60/s, 3 s, looser
## bounds): the first 201 within 1 s of the resume, every instance within
## 3 s, into bench/ledger-pause.txt. PAUSE_RATE is twice the rate of the
## fault run that found the slow recovery; this run's BFFs are the product
## build (no race detector), as its bounds are the product's.
HISTORY_OPS    ?= 10000
HOLD_OPS       ?= 3000
CHAOS_DURATION ?= 3m
CHAOS_USERS    ?= 200
LEDGER_PAUSE   ?= 10s
PAUSE_RATE     ?= 400
chaos: test-deps
	rm -f bench/ledger-faults.txt
	BFF_LEDGER_PAUSE=$(LEDGER_PAUSE) BFF_LEDGER_FAULTS_REPORT=$(CURDIR)/bench/ledger-faults.txt \
	  ./scripts/with-postgres.sh $(GO) test -tags $(TAGS) -race -count=1 -timeout 10m -run '^(TestLedger|TestDurability)' -v ./internal/ledger
	BFF_REVOCATION_SESSIONS=1000 ./scripts/with-postgres.sh ./scripts/with-redis.sh $(GO) test -tags $(TAGS) -count=1 -timeout 10m -run '^TestRevocationWinsOnEveryInstance$$' -v ./e2e
	BFF_HOLD_OPS=$(HOLD_OPS) ./scripts/with-postgres.sh $(GO) test -tags $(TAGS) -count=1 -timeout 30m -run '^TestHoldHistories' -v ./internal/payments \
	  > bench/holds.txt; status=$$?; grep -E '^(---|ok|FAIL)|operations|invariant' bench/holds.txt; exit $$status
	rm -f bench/histories.txt
	BFF_HISTORY_OPS=$(HISTORY_OPS) BFF_HISTORY_REPORT=$(CURDIR)/bench/histories.txt ./scripts/with-postgres.sh ./scripts/with-redis.sh \
	  $(GO) test -tags $(TAGS) -count=1 -timeout 60m -run '^TestPaymentHistories$$' -v ./e2e
	BFF_E2E_PRODUCT_BUILD=1 BFF_PAUSE_STRICT=1 BFF_PAUSE_RATE=$(PAUSE_RATE) BFF_LEDGER_PAUSE=$(LEDGER_PAUSE) BFF_PAUSE_REPORT=$(CURDIR)/bench/ledger-pause.txt \
	  ./scripts/with-postgres.sh ./scripts/with-redis.sh $(GO) test -tags $(TAGS) -count=1 -timeout 10m -run '^TestLedgerPauseRecovery$$' -v ./e2e
	BFF_CHAOS_DURATION=$(CHAOS_DURATION) BFF_CHAOS_USERS=$(CHAOS_USERS) BFF_CHAOS_REPORT=$(CURDIR)/bench/chaos.txt \
	  ./scripts/with-postgres.sh ./scripts/with-redis.sh $(GO) test -tags $(TAGS) -count=1 -timeout 40m -run '^TestPaymentsUnderFaults$$' -v ./e2e

## mutants: each plausible broken rule of the money path (internal/mutant)
## built in, one at a time, and its fast checks run against it (the money
## history checker, TestMoneyHistories, and the rule's unit tests): each
## run must fail. Go only, two to three minutes on 2 cores. The table (what
## killed each mutant, in how long) goes to bench/mutants.txt; make test
## runs the same loop (tools/mutants, TestEveryMutantIsKilled).
mutants:
	GO=$(GO) $(GO) run ./tools/mutants -out bench/mutants.txt

## fuzz: each native fuzz target for FUZZTIME (default 60s)
FUZZTIME ?= 60s
fuzz:
	./scripts/fuzz.sh $(FUZZTIME)

## check-config: check a configuration file as the BFF would at start
## (CONFIG, default config.dev.yaml, what make run uses; the BFF_* variables
## of the environment apply, as they would). config.example.yaml documents
## every key with its default and leaves the deployment's own values
## (upstream, OpenID provider, Redis, keys) empty: check it with them set,
## e.g. make check-config CONFIG=config.example.yaml with BFF_UPSTREAM_BASE_URL=...
CONFIG ?= config.dev.yaml
check-config: build
	./$(BIN)/bff -config $(CONFIG) -check

clean:
	rm -rf $(BIN)
