# The API's OpenAPI document (shared/api/openapi.go; included by the root Makefile).
#
#   make openapi-check  validate openapi.json, which TestOpenAPIJSON keeps equal to
#                       GET /api/openapi.json, with an OpenAPI 3 validator from npm
#                       (@apidevtools/swagger-parser, pinned by package-lock.json)

OPENAPI_DIR := scripts/openapi

.PHONY: openapi-check

openapi-check: $(OPENAPI_DIR)/node_modules/.package-lock.json
	node $(OPENAPI_DIR)/validate.mjs openapi.json

$(OPENAPI_DIR)/node_modules/.package-lock.json: $(OPENAPI_DIR)/package-lock.json $(OPENAPI_DIR)/package.json
	cd $(OPENAPI_DIR) && npm ci --no-audit --no-fund --loglevel=error

# `make test` also validates the document (TEST_CHECKS run at once).
TEST_CHECKS += openapi-check
