# NoETL's offline playbook corpus and the python environment steps run in
# (included by the root Makefile; README "NoETL's playbook corpus").
#
#   make corpus        run every playbook of ../shared/conformance/noetl-e2e/offline.json
#                      end to end (noetl corpus: a throwaway stack, a database for the
#                      credential aliases, the HTTP fixture) and print each outcome;
#                      CORPUS_FLAGS adds flags, e.g. CORPUS_FLAGS="--only pagination --dump /tmp/views"
#   make steps-python  the interpreter python steps run with under make run and
#                      make corpus: Debian's python3 with the packages below, in a
#                      venv over the system site packages ($(STEPS_PYTHON)); steps
#                      never install packages themselves (R-P3)

CORPUS_FLAGS ?=
STEPS_PYTHON := build/steps-python
# What a NoETL step may import besides the standard library, from Debian (PyPI is
# not reachable here): NoETL's worker ships psycopg and httpx; psycopg2, requests
# and yaml are what the corpus's and users' steps import most.
STEPS_DEBS := python3 python3-psycopg python3-psycopg2 python3-httpx python3-requests python3-yaml

.PHONY: corpus steps-python

corpus: steps-python
	$(GO) build -o bin/noetl ./cmd/noetl
	./bin/noetl corpus --python $(CURDIR)/$(STEPS_PYTHON)/bin/python3 $(CORPUS_FLAGS)

steps-python: $(STEPS_PYTHON)/bin/python3

$(STEPS_PYTHON)/bin/python3: mk/corpus.mk
	@missing=$$(for p in $(STEPS_DEBS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then echo "installing $$missing"; apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing; fi
	rm -rf $(STEPS_PYTHON)
	/usr/bin/python3 -m venv --system-site-packages --without-pip $(STEPS_PYTHON)
	$@ -c 'import psycopg, psycopg2, httpx, requests, yaml'
