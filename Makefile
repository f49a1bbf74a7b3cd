# The two commands a newcomer needs: `make run` and `make test` (see README.md).
# Area-specific targets live in mk/*.mk so each area owns its own file.

GO        ?= go
GOFLAGS   ?=
# Fuzz budget per target in `make test`, as an execution count: a duration
# budget (e.g. 10s) trips Go 1.26's coordinator race at the deadline
# (go.dev/issue/75804: a bare "context deadline exceeded" FAIL with no failing
# input), which a count cannot hit. 30000x is about 10 s for the slowest target
# (tmpl FuzzRender) on 2 cores. Raise it locally: make fuzz FUZZTIME=2000000x.
FUZZTIME  ?= 30000x

.PHONY: run test vet unit fuzz fmt-check bench bench-whatif

# run: the whole stack in one process with a demo (see README "What you see").
# Flags for noetl dev go in DEV_FLAGS, e.g. make run DEV_FLAGS=--exit.
DEV_FLAGS ?=
# Python steps run with the steps' environment (mk/corpus.mk, steps-python).
run: dashboard steps-python
	$(GO) build -o bin/noetl ./cmd/noetl
	./bin/noetl dev --python $(CURDIR)/$(STEPS_PYTHON)/bin/python3 $(DEV_FLAGS)

# bench: the step path measured (see docs/step-path.md): `noetl bench` starts a
# durable Postgres and noetl serve, runs the default shapes, a 10,000-iteration
# loop, and 50x10 through NoETL's workers' protocols (--noetl: the Rust worker's
# four calls, --noetl-batch: the Python worker's claim and two batches), each
# three times in rounds with its median [min..max]. Compare with River's
# medians of three in the same sitting:
#   FSYNC_MODES=on REPS=3 bash ../shared/bench/river-bench.sh
# BENCH_FLAGS adds flags, e.g. make bench BENCH_FLAGS="--json --shape 50x10".
BENCH_FLAGS ?=
bench:
	$(GO) build -o bin/noetl ./cmd/noetl
	./bin/noetl bench --loop 10000x100 --noetl 50x10 --noetl-batch 50x10 $(BENCH_FLAGS)
	$(MAKE) bench-whatif

# bench-whatif: the what-if over 1,000 recorded executions of a 10-step
# playbook, through the API and Postgres and in memory (docs/whatif.md).
bench-whatif:
	$(GO) test -count=1 -run '^$$' -bench 'BenchmarkWhatIf' -benchtime 3x ./shared/whatif ./e2e

# test: everything CI checks.
# dashboard and chromium (mk/dashboard.mk) are what the browser test needs.
# After the set-up the checks run at once (make -j): the unit tests' slowest
# packages wait on Postgres, leases and timeouts more than on the CPU, and the
# fuzz targets and the OpenAPI and serverless checks (TEST_CHECKS, added to by
# mk/*.mk) fill that time. Their lines interleave as they come (make's
# --output-sync would hold the unit tests' lines until all of them ended).
TEST_CHECKS := unit fuzz
test: fmt-check vet dashboard chromium
	$(MAKE) --no-print-directory -j $(TEST_CHECKS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null; git ls-files --others --exclude-standard '*.go' 2>/dev/null)); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

unit: dashboard
	$(GO) test -count=1 -timeout 30m ./...

# Each fuzz target runs on its own (go test allows one -fuzz target per run).
fuzz:
	@set -e; for f in $$(grep -rl --include='*_test.go' '^func Fuzz' shared cmd 2>/dev/null | xargs -r dirname | sort -u); do \
	  for t in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$f/*_test.go | sed 's/^func //' | sort -u); do \
	    echo "fuzz ./$$f $$t ($(FUZZTIME))"; \
	    $(GO) test ./$$f -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) >/tmp/fuzz.$$$$.log 2>&1 || { cat /tmp/fuzz.$$$$.log; rm -f /tmp/fuzz.$$$$.log; exit 1; }; \
	  done; \
	done; rm -f /tmp/fuzz.*.log

-include mk/*.mk
