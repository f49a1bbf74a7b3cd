package corpus

import (
	"fmt"
	"strings"
	"time"

	"github.com/noetl-go/noetl/shared/tmpl"
	"github.com/noetl-go/noetl/shared/wire"
)

// Check is how one playbook is judged: the status it must end in and what its own
// validation step must have found.
type Check struct {
	// Status is the final status expected (default COMPLETED).
	Status string
	// Expect are template expressions (without braces) that must each be true. They
	// see every step's result under the step's name, `steps` (name → {status,
	// result, visits}), `status` and `error` (the execution's).
	Expect []string
	// Payload is added to the execute payload (api_url is always the fixture's).
	Payload map[string]any
	// Timeout overrides the runner's per-playbook timeout.
	Timeout time.Duration
	// Known is the documented reason the playbook does not pass here
	// (docs/noetl-playbooks.md); the runner still runs it and reports a pass.
	Known string
}

// judge returns "" when the run is what the check expects, else what is wrong.
func (c Check) judge(v *wire.Execution) string {
	want := c.Status
	if want == "" {
		want = "COMPLETED"
	}
	if v.Status != want {
		return fmt.Sprintf("status %s, want %s", v.Status, want)
	}
	vars := map[string]any{"status": v.Status, "error": string(v.Error)}
	steps := map[string]any{}
	for name, st := range v.Steps {
		steps[name] = map[string]any{"status": st.Status, "result": st.Result.V, "visits": int64(st.Visits)}
		if _, reserved := vars[name]; !reserved {
			vars[name] = st.Result.V
		}
	}
	vars["steps"] = steps
	var failed []string
	for _, e := range c.Expect {
		t, err := tmpl.Compile("{{ " + e + " }}")
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", e, err))
			continue
		}
		got, err := t.Render(tmpl.Env{Vars: vars, Now: time.Now()})
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", e, err))
			continue
		}
		if !tmpl.Truthy(got) {
			failed = append(failed, e)
		}
	}
	return strings.Join(failed, "; ")
}

// checkFor is the check of a playbook file (relative to playbooks/).
func checkFor(file string) Check { return checks[file] }

// checks are written from each playbook's own validation step: what it computes
// and what a correct run gives. A playbook missing here only has to complete.
var checks = map[string]Check{}
