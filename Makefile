# placement: the verified session-placement core.
#
#   make test     what CI runs (.ci/run): lint, race tests, the explorer on every config
#                 compared with TLC's recorded results (conformance), the benchmarks once,
#                 the bug zoo; each step timed and logged (scripts/check.sh test)
#   make verify   the main job: test's steps, then the bug zoo's bound audit, a longer
#                 Porcupine campaign, the fuzz pass and TLC, with a report table
#   make tlc      re-run TLC (needs TLA2TOOLS_JAR) and record its results as data
#   make bench    the benchmark tables and targets, every contender in its default
#                 configuration (FULL=1: 1e6 bindings, medians of 3), then the peers
#                 (benchmarks/peers) in interleaved rounds; make benchstat OLD= NEW=
#   make mutants  the bug zoo: every broken variant must be caught
#   make fuzz     the fuzz pass (FUZZTIME inputs per target)
#   make campaign the nightly campaign: every checker in rotation for DURATION (default 5m; 8h
#                 for a night), the bug zoo once, a report in REPORT (index.html)
#   make stress   the stress tests for CAMPAIGN_STRESS each under -race
#   make api      rewrite the public API's golden files (api/*.txt) after an intended change
#   make apidiff  the public API's changes since the last release tag (in make verify)
#   make consumer the embedding contract's tests (consumer/, a module of its own; in make test)

SHELL       := /bin/bash
.SHELLFLAGS := -o pipefail -c
GO          ?= go
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
CONFIGS     := $(filter-out spec/tla/MCClaims%,$(wildcard spec/tla/MC*.cfg))

.PHONY: api apidiff consumer test lint race conformance explore explore-claims bench-smoke mutants fuzz campaign stress verify tlc bench benchstat

test:
	@scripts/check.sh test

verify:
	@scripts/check.sh verify

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	cd benchmarks/peers && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...
	cd consumer && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...

# The exported API of every public package is in api/*.txt, checked by
# go test ./internal/apigolden (in make test); after an intended change,
# regenerate them and commit them with it (docs/compatibility.md).
api:
	$(GO) test -count=1 ./internal/apigolden -run TestAPIGolden -update

apidiff:
	@scripts/apidiff.sh

consumer:
	cd consumer && $(GO) test -race -count=1 ./...

race:
	$(GO) test -race -count=1 -timeout 15m -skip '^TestConformance(DetectsDrift)?$$' ./...

# The full-size configs are compared with TLC, and the drift checks run, without the race detector.
conformance:
	$(GO) test -count=1 -timeout 15m -run '^(TestConformance(DetectsDrift)?|TestExploreSameForEveryWorkerCount)$$' -skip '^TestExploreSameForEveryWorkerCount$$/^(MCTimeouts|MCLiveness|MCBugNoHandOff)\.cfg$$' -v ./model/... | grep --line-buffered -E '^(=== RUN|---|\s+conformance_test|ok|FAIL|PASS)'

# Every config, one line each, as the explorer's command line reports it
# (the conformance test explores the same configs and compares with TLC).
explore:
	@$(GO) build -o .bin/explore ./model/cmd/explore
	@for cfg in $(CONFIGS); do \
	  case $$cfg in *MCBug*|*MCWitness*) flag=-expect-violation ;; *) flag= ;; esac; \
	  .bin/explore -q $$flag -config $$cfg || exit 1; \
	done

# The claims spec's configs (spec/tla/MCClaims*.cfg), explored and compared with TLC's results.
explore-claims:
	$(GO) test -count=1 -run 'TestConformance$$' -v ./model/claims/ | grep --line-buffered -E '^(\s+---|---|\s+conformance_test|ok|FAIL)'

# Every benchmark once, so a broken one fails CI (figures come from make bench).
# The peers (benchmarks/peers, a nested module): their tests and every peers
# benchmark once at the short size.
bench-smoke:
	$(GO) test -count=1 -timeout 8m -run '^$$' -bench . -benchtime 1x ./benchmarks/ > /dev/null
	cd benchmarks/peers && $(GO) test -count=1 -short -timeout 3m -run . -bench . -benchtime 1x ./... > /dev/null

# The bug zoo: every broken variant of impl/placement must be caught.
mutants:
	$(GO) run ./linearizability/cmd/mutants

# The fuzz pass: every target for FUZZTIME, a count of inputs (Nx; nightly:
# FUZZTIME=3000000x). Counts, not durations: Go 1.26's fuzz coordinator can
# report "context deadline exceeded" at the end of a -fuzztime window with no
# crasher (golang/go#75804, fixed in Go 1.27); a count budget has no window.
FUZZTIME ?= 100000x
fuzz:
	@for t in $$($(GO) test -list '^Fuzz' ./fuzz/ | grep ^Fuzz); do \
	  echo "fuzz: $$t for $(FUZZTIME)"; \
	  $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) -timeout 20m ./fuzz/ || exit 1; \
	done

# The nightly campaign (cmd/campaign, README's "The nightly campaign"):
# every checker in rotation for DURATION, the bug zoo once, a progress line,
# and a report in REPORT (summary.json, summary.md, index.html). RESUME=1
# continues the campaign whose state.json is in REPORT; SEED fixes the seed;
# ONLY=core,fuzz selects checkers. Exit status non-zero on any failure or
# any checker that could not run.
DURATION ?= 5m
REPORT   ?= campaign-report
campaign:
	$(GO) run ./cmd/campaign -duration $(DURATION) -out $(REPORT) $(if $(SEED),-seed $(SEED)) $(if $(ONLY),-only $(ONLY)) $(if $(RESUME),-resume)

# The stress tests alone, for CAMPAIGN_STRESS each at GOMAXPROCS 8 under -race.
CAMPAIGN_STRESS ?= 2m
stress:
	PLACEMENT_STRESS=$(CAMPAIGN_STRESS) $(GO) test -race -count=1 -timeout 60m -v \
	  -run 'Stress|EpochWrap|CloseDuringCapacitySweep' ./impl/placement/ ./linearizability/ | grep --line-buffered -E '^(---|ok|FAIL)|stress_test'

tlc:
	@spec/tla/tlc.sh

# The benchmark suite, from one run: every contender in its default
# configuration (ns/op, allocs/op, B/op, ratios to the floor and every
# baseline), the scaling table, the issue's target table (measured ratio,
# met or missed) and the other configurations. Writes
# benchmarks/results/latest.md, the raw latest.txt (benchstat's input) and
# the gonum/plot plots growth.png and scaling.png. Short by default (up to
# 1e5 bindings, one run); FULL=1 for up to 1e6 bindings, the full model
# config and the median of 3 runs.
#
# Then the peers (benchmarks/peers, a nested module: otter, xsync, the
# expirable LRU, ristretto) in interleaved rounds (ROUNDS, default 7):
# each contender's median ratio to placement and its spread, the targets
# against the bare xsync map; writes benchmarks/results/peers.md,
# peers.txt and the plot peers.png.
ROUNDS ?= 7
bench:
	$(GO) run ./benchmarks/cmd/benchtable $(if $(FULL),-full -count 3)
	@echo "plots: benchmarks/results/growth.png benchmarks/results/scaling.png"
	cd benchmarks/peers && $(GO) run ./cmd/peerbench -rounds $(ROUNDS) -out ../results

# Compare two raw benchmark outputs: make benchstat OLD=a.txt NEW=b.txt
BENCHSTAT := golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
benchstat:
	$(GO) run $(BENCHSTAT) $(OLD) $(NEW)
