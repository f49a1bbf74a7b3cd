# Files derived from the route table, Routes() in shared/api/routes.go
# (included by the root Makefile; docs/architecture.md, "Adding a route").
#
#   make generate  rewrite routes.json, openapi.json and the HttpApi events of
#                  template.yaml (only the lines between each function's
#                  "# BEGIN routes of <fn>" and "# END routes of <fn>" markers)
#
# make test fails while any of them differs from what this writes
# (TestRoutesJSON, TestOpenAPIJSON and TestSAMTemplate in shared/api).

.PHONY: generate

generate:
	$(GO) run ./cmd/noetl routes --write .
