# runnerflow's entry points. The two a newcomer needs: `make demo` and `make test`.
GO ?= go
export GOTOOLCHAIN := local
export GOFLAGS := -buildvcs=false

.PHONY: demo test tools lint vet bench bench-arc record-histories fault-long upgrade-check lint-only

## demo: run the whole system locally (test world with Temporal UI, worker, starter, example pools).
demo: tools
	$(GO) run ./demo

## test: build the test world's tools once per machine, then run the checkers and every test (race detector on).
test: tools
	$(GO) vet ./...
	$(MAKE) --no-print-directory lint-only
	$(GO) test -race -count=1 -timeout 80m ./...

## lint: workflowcheck (determinism of the workflow code, configured in workflows/workflowcheck.yaml)
## and staticcheck, both built at pinned versions by scripts/tools.sh (tools/lint).
lint: tools lint-only
lint-only:
	bin/workflowcheck -config workflows/workflowcheck.yaml ./workflows/...
	bin/staticcheck ./...

## bench: measure runnerflow in the local test world (takes the machine for a while; see docs/benchmarks.md).
## BENCH_FLAGS passes options, e.g. make bench BENCH_FLAGS='--jobs 100 --idle 1000'.
BENCH_FLAGS ?=
bench: tools
	$(GO) run ./bench --out bench-results.json $(BENCH_FLAGS)

## bench-arc: the bursts of runnerflow and of actions-runner-controller v0.27.6, one after the other, side by side
## (figures 1, 2 and 4 with the ratio runnerflow / ARC; see docs/benchmarks.md).
bench-arc: tools
	$(GO) run ./bench --peer arc --skip memory,throughput --out bench-results.json $(BENCH_FLAGS)

## record-histories: on release, record this build's workflow histories into workflows/testdata (the
## integration tests that write them run with RUNNERFLOW_RECORD_HISTORY), then replay every build's.
## BUILD names the build, e.g. make record-histories BUILD=v3; commit the new files.
record-histories: tools
	@test -n "$(BUILD)" || { echo "usage: make record-histories BUILD=<build, e.g. v3>" >&2; exit 2; }
	RUNNERFLOW_RECORD_HISTORY=$(BUILD) $(GO) test -count=1 -timeout 30m ./integration/runners/ ./integration/pools/ ./integration/jobs/
	$(GO) test -count=1 -run TestReplaysRecordedHistories ./workflows/

## fault-long: the API-server fault of integration/faults with a 10-minute pause instead of make test's 90 s.
fault-long: tools
	RUNNERFLOW_FAULT_PAUSE=10m $(GO) test -count=1 -timeout 40m -run TestAPIServerPausedMidBurst -v ./integration/faults/

## tools: build the Temporal CLI, kube-apiserver, etcd, kube-controller-manager and ARC, fetch GitHub's OpenAPI description (cached per machine).
tools:
	bash scripts/tools.sh all
