package api_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/api/apitest"
	"github.com/noetl-go/noetl/shared/store"
)

// aliasBomb is the billion laughs: nine levels of nine aliases in the
// workload, about 500 bytes standing for 9^9 nodes. It ran the server out of
// memory at register.
const aliasBomb = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: bomb, path: hostile/bomb}
workload:
  a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]
  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
  c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
  d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
  e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
  f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
  g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
  h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
  i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
workflow:
  - step: start
    tool: {kind: noop}
`

// multiplyingPlaybook renders, at the start step's dispatch, the template:
// three replaces, each ten times longer (100 MB at the third).
const multiplyingPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: grow, path: hostile/grow}
workflow:
  - step: start
    tool:
      kind: noop
      message: "{{ ('a' * 100000)|replace('a', 'aaaaaaaaaa')|replace('a', 'aaaaaaaaaa')|replace('a', 'aaaaaaaaaa') }}"
`

const expansionLimit = "more than 100000 YAML nodes (limit MaxExpandedNodes)"

// TestRegisterAliasBombRefused: the bomb gets a 422 naming the limit and the path,
// as text or base64, and nothing is written.
func TestRegisterAliasBombRefused(t *testing.T) {
	s := apitest.New(t, apitest.Options{})
	before := s.Counts(t)
	for _, content := range []string{aliasBomb, base64.StdEncoding.EncodeToString([]byte(aliasBomb))} {
		r := must(t, s.API, 422, call{method: "POST", target: "/api/catalog/register", token: tAPI, body: map[string]any{"content": content}})
		problems, _ := r.json["problems"].([]any)
		if !strings.Contains(r.str("error"), expansionLimit) || len(problems) != 1 || !strings.HasPrefix(problems[0].(string), "workload.f[0]: ") {
			t.Fatalf("422 body %s", r.Body)
		}
	}
	if after := s.Counts(t); after != before {
		t.Fatalf("the refused bomb wrote rows: %+v → %+v", before, after)
	}
	r := must(t, s.API, 200, call{method: "GET", target: "/api/catalog?path=hostile/bomb", token: tAPI})
	if es := r.json["entries"].([]any); len(es) != 0 {
		t.Fatalf("catalog entries %v", es)
	}
}

// TestExecuteCatalogEntryPastExpansionLimit: content stored before the limit (or
// written around the API) is refused at execute with a 422, not a 500 or an
// out-of-memory crash, and no execution starts.
func TestExecuteCatalogEntryPastExpansionLimit(t *testing.T) {
	s := apitest.New(t, apitest.Options{})
	if _, _, err := store.RegisterCatalog(s.Ctx, s.Store.Cluster(), "hostile/bomb", "Playbook", aliasBomb); err != nil {
		t.Fatal(err)
	}
	before := s.Counts(t)
	r := must(t, s.API, 422, call{method: "POST", target: "/api/execute", token: tAPI, body: map[string]any{"path": "hostile/bomb"}})
	if !strings.Contains(r.str("error"), expansionLimit) {
		t.Fatalf("422 body %s", r.Body)
	}
	if after := s.Counts(t); after != before {
		t.Fatalf("rows written: %+v → %+v", before, after)
	}
}

// TestMultiplyingTemplateFailsExecution: the playbook is valid, so it registers;
// its execution ends FAILED at the start step's dispatch with an error naming the
// render budget, and no command is issued. A multiplying workload template fails
// execute itself with a 422 naming the budget, starting nothing.
func TestMultiplyingTemplateFailsExecution(t *testing.T) {
	s := apitest.New(t, apitest.Options{})
	must(t, s.API, 200, call{method: "POST", target: "/api/catalog/register", token: tAPI, body: map[string]any{"content": multiplyingPlaybook}})
	ex := must(t, s.API, 200, call{method: "POST", target: "/api/execute", token: tAPI, body: map[string]any{"path": "hostile/grow"}})
	execID := ex.str("execution_id")
	r := must(t, s.API, 200, call{method: "GET", target: "/api/executions/" + execID, token: tAPI})
	errText, _ := r.json["error"].(string)
	if r.str("status") != "FAILED" || !strings.Contains(errText, "render budget exceeded") ||
		!strings.Contains(errText, "more than 16 MiB of text (limit MaxRenderBytes = 16777216 bytes per render)") {
		t.Fatalf("execution %s", r.Body)
	}
	events := must(t, s.API, 200, call{method: "GET", target: "/api/executions/" + execID + "/events?event_type=command.issued", token: tAPI})
	if es := events.json["events"].([]any); len(es) != 0 {
		t.Fatalf("%d commands issued", len(es))
	}

	workload := strings.Replace(strings.Replace(multiplyingPlaybook, "path: hostile/grow", "path: hostile/grow_workload", 1),
		"workflow:", "workload:\n  big: \"{{ ('a' * 100000)|replace('a', 'aaaaaaaaaa')|replace('a', 'aaaaaaaaaa')|replace('a', 'aaaaaaaaaa') }}\"\nworkflow:", 1)
	must(t, s.API, 200, call{method: "POST", target: "/api/catalog/register", token: tAPI, body: map[string]any{"content": workload}})
	before := s.Counts(t)
	r = must(t, s.API, 422, call{method: "POST", target: "/api/execute", token: tAPI, body: map[string]any{"path": "hostile/grow_workload"}})
	if !strings.Contains(r.str("error"), "workload.big") || !strings.Contains(r.str("error"), "limit MaxRenderBytes") {
		t.Fatalf("422 body %s", r.Body)
	}
	if after := s.Counts(t); after != before {
		t.Fatalf("rows written: %+v → %+v", before, after)
	}
}
