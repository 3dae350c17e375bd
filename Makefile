# runnerflow's entry points. The two a newcomer needs: `make demo` and `make test`.
GO ?= go
export GOTOOLCHAIN := local
export GOFLAGS := -buildvcs=false

.PHONY: demo test tools lint vet bench bench-arc record-histories fault-long upgrade-check lint-only

## demo: run the whole system locally (test world with Temporal UI, worker, starter, example pools).
demo: tools
	$(GO) run ./demo

## test: build the test world's tools once per machine, then run the checkers and every test (race detector on).
## Three packages run at once (go test's default is one per core): an integration package's world
## mostly waits on its system's timers and leaves the cores idle, so a third keeps them busy.
TEST_PACKAGES_AT_ONCE ?= 3
test: tools
	$(GO) vet ./...
	$(MAKE) --no-print-directory lint-only
	$(GO) test -race -count=1 -timeout 80m -p $(TEST_PACKAGES_AT_ONCE) ./...

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

## bench-arc: the bursts of runnerflow (webhook and scale-set pools) and of actions-runner-controller (v0.27.6's summerwind
## mode, gha-runner-scale-set 0.14.2's scale sets at the chart's defaults and tuned), one after the other, side by side
## (figures 1, 2 and 4 with the ratio runnerflow / each; see docs/benchmarks.md). BENCH_FLAGS='--warm 500' for warm bursts.
bench-arc: tools
	$(GO) run ./bench --peer arc,arc-scaleset,arc-scaleset-tuned --scaleset --skip memory,throughput,fleet,pull-fleet --out bench-results.json $(BENCH_FLAGS)

## record-histories: on release, record this release's workflow histories into workflows/testdata (the
## integration tests that write them run with RUNNERFLOW_RECORD_HISTORY, one package at a time),
## then replay every release's. RELEASE defaults to the VERSION file; commit the new files.
RELEASE ?= $(shell cat VERSION)
RECORDING_PACKAGES = ./integration/runners/ ./integration/pools/ ./integration/jobs/ ./integration/clusters/ ./integration/faults/ ./integration/webhooks/
RECORDING_TESTS = TestEphemeralRunnersEachRunOneJob|TestCompletedEventBeforeTheRunnerEnds|TestBusyRunnerDrainedMidJobFinishesItsJob|TestPoolScalesRollsOutAndScalesToZero|TestOperatorCommandsWithTheTemporalCLI|TestQuotaRefusalsWaitForRoom|TestReconcileRemovesOrphansAndKeepsWhatPoolsOwn|TestWarmRegistrationsServeABurstWithoutRegistering|TestPoolAtRest|TestPullOnlyPoolScalesUpAndToZero|TestOneRunnerPerJobAcrossPools|TestPoolMovesToTheNextClusterWhileTheFirstIsDown|TestIntakeDownHalfAnHourLosesNothing|TestWhyExplainsJobsTheIntakeTookOrMissed|TestScaleSetPoolServesABurstWithoutRESTCallsPerRunner|TestRunnerEndsBeforeItsJobsEvents|TestScaleSetRunnerEndsBeforeItsMessages|TestScaleSetOfferingSetServesABurst|TestPrewarmStartsBuildsRunnerBeforeBuildIsQueued
record-histories: tools
	@test -n "$(RELEASE)" || { echo "usage: make record-histories RELEASE=<release, e.g. v5>" >&2; exit 2; }
	for pkg in $(RECORDING_PACKAGES); do \
	  RUNNERFLOW_RECORD_HISTORY=$(RELEASE) $(GO) test -count=1 -timeout 30m -run '$(RECORDING_TESTS)' $$pkg || exit 1; \
	done
	$(GO) test -count=1 -run 'TestReplaysRecordedHistories|TestEveryWorkflowTypeHasRecordedHistories' ./workflows/

## upgrade-check: rehearse a deploy from an earlier release (FROM=<release>, e.g. v5): its worker and starter,
## built from the commit CHANGELOG.md names for it, run a burst and a pool at rest; this tree's take over mid-burst.
## Every job must run once and no history may meet a non-determinism error. Several minutes: not in make test;
## a step of every release (CHANGELOG.md), whose section records the line it ends with.
upgrade-check: tools
	@test -n "$(FROM)" || { echo "usage: make upgrade-check FROM=<release, e.g. v5>" >&2; exit 2; }
	bash scripts/upgrade-check.sh $(FROM)

## fault-long: the API-server fault of integration/faults with a 10-minute pause instead of make test's 90 s.
fault-long: tools
	RUNNERFLOW_FAULT_PAUSE=10m $(GO) test -count=1 -timeout 40m -run TestAPIServerPausedMidBurst -v ./integration/faults/

## tools: build the Temporal CLI, kube-apiserver, etcd, kube-controller-manager and ARC, fetch GitHub's OpenAPI description (cached per machine).
tools:
	bash scripts/tools.sh all
