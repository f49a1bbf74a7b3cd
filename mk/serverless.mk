# Serverless packaging (included by the root Makefile).
#
#   make build              every function's bootstrap under build/<fn>/bootstrap
#   make package            $(BUILD_DIR)/<fn>.zip for each function (reproducible zips)
#   make build-<LogicalId>  what `sam build` calls (BuildMethod: makefile); writes
#                           $(ARTIFACTS_DIR)/bootstrap
#   make test-serverless    cfn-lint, the offline SAM transform + checks, and the
#                           infra/ (CDK) vet and tests; part of `make test`
#
# ARCH must match the template's Architecture parameter (arm64 by default):
# `ARCH=x86_64 sam build` for x86_64.

ARCH     ?= arm64
PYTHON   ?= python3
CFN_LINT ?= cfn-lint

LAMBDA_FUNCTIONS := catalog execute ingest claim status replay outbox schedules keychain

# Lambda says x86_64 where Go says amd64; accept either.
LAMBDA_GOARCH = $(if $(filter x86_64,$(ARCH)),amd64,$(ARCH))

# $(call lambda-build,OUTDIR,FUNCTION): a static, stripped Linux binary named
# bootstrap, as provided.al2023 expects; lambda.norpc drops the go1.x RPC shim.
lambda-build = mkdir -p $(1) && CGO_ENABLED=0 GOOS=linux GOARCH=$(LAMBDA_GOARCH) $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' -o $(1)/bootstrap ./functions/$(2)

# sam build sets ARTIFACTS_DIR; without it the binary would land in /bootstrap.
need-artifacts-dir = @test -n "$(ARTIFACTS_DIR)" || { echo "$@: ARTIFACTS_DIR is not set (sam build sets it); for a local build run: make build" >&2; exit 2; }

.PHONY: build package test-serverless serverless-lint serverless-transform infra-test

# build-<Name>Function builds functions/<name> (CatalogFunction: catalog): one
# rule for every function of LAMBDA_FUNCTIONS. Not .PHONY: make skips the
# pattern-rule search for phony targets.
build-%Function:
	$(need-artifacts-dir)
	$(call lambda-build,$(ARTIFACTS_DIR),$(shell echo '$*' | tr A-Z a-z))

# The status function serves the dashboard: its layout library is embedded.
build-StatusFunction: dashboard

# build/<fn>/bootstrap is also what infra/ (CDK Code.fromAsset) deploys.
BUILD_DIR ?= build
build: dashboard
	@set -e; $(foreach fn,$(LAMBDA_FUNCTIONS),echo "$(BUILD_DIR)/$(fn)/bootstrap (GOARCH=$(LAMBDA_GOARCH))"; $(call lambda-build,$(BUILD_DIR)/$(fn),$(fn));)

package: build
	@set -e; $(foreach fn,$(LAMBDA_FUNCTIONS),$(PYTHON) scripts/lambda_zip.py $(BUILD_DIR)/$(fn).zip $(BUILD_DIR)/$(fn)/bootstrap; echo "$(BUILD_DIR)/$(fn).zip";)

test-serverless: serverless-lint serverless-transform infra-test

serverless-lint:
	$(CFN_LINT) template.yaml

serverless-transform:
	AWS_DEFAULT_REGION=$${AWS_DEFAULT_REGION:-us-east-1} $(PYTHON) scripts/sam_transform.py

# infra/ is its own module (CDK is heavy): the root's ./... never reaches it.
# The first run compiles the CDK bindings (~90 s on 2 cores), then seconds.
infra-test:
	cd infra && JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 $(GO) vet ./... && \
	JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 $(GO) test -timeout 30m ./...

# `make test` also runs the serverless checks (TEST_CHECKS run at once).
TEST_CHECKS += test-serverless
