# The web dashboard (shared/dashboard; included by the root Makefile).
#
#   make dashboard             install the layout library from npm (package-lock.json)
#                              and copy its browser build into web/vendor/ for go:embed
#   make chromium              install Debian's chromium for the browser test when missing
#   make dashboard-screenshot  rerun the browser test and write docs/dashboard-execution.png

DASHBOARD_DIR := shared/dashboard
DAGRE_DIST    := $(DASHBOARD_DIR)/node_modules/@dagrejs/dagre/dist

.PHONY: dashboard chromium dashboard-screenshot

dashboard: $(DASHBOARD_DIR)/web/vendor/dagre.js

$(DASHBOARD_DIR)/web/vendor/dagre.js: $(DASHBOARD_DIR)/package-lock.json $(DASHBOARD_DIR)/package.json
	cd $(DASHBOARD_DIR) && npm ci --no-audit --no-fund --loglevel=error
	sed '/sourceMappingURL/d' $(DAGRE_DIST)/dagre.esm.js > $@.tmp && mv $@.tmp $@
	cp $(DAGRE_DIST)/dagre.esm.js.LEGAL.txt $(DASHBOARD_DIR)/web/vendor/dagre.LICENSE.txt

# The browser test drives Debian's chromium (we run as root on the build machines).
chromium:
	@command -v chromium >/dev/null 2>&1 || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; }

dashboard-screenshot: dashboard chromium
	DASHBOARD_SCREENSHOT=$(CURDIR)/docs/dashboard-execution.png $(GO) test -count=1 -run '^TestDashboard$$' ./e2e/
