package corpus

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/conformance"
	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
)

func TestMain(m *testing.M) { devstacktest.Main(m) }

// slow are the playbooks of ours left out of make test's subset: each takes more
// than a few seconds (stress loads, lease-length sleeps, the PFT flow). make corpus
// runs them.
var slow = []string{
	"batch_execution/", "load_test/", "patient_batch_parallel_queue/", "pft_flow_test/",
	"pagination/basic/", "test_resolve_by_urn.yaml", "test_side_effect_barrier.yaml", "vars_test/test_vars_api.yaml",
	"pagination/pipeline/test_pipeline_error_handling.yaml",
}

// TestCorpusSubset runs, as make corpus does, every local and local+http playbook
// of NoETL's offline corpus that takes at most a few seconds, and requires each to
// pass its own checks (except those docs/noetl-playbooks.md names with a reason).
func TestCorpusSubset(t *testing.T) {
	dir := filepath.Join(conformance.Dir(t), "noetl-e2e")
	entries, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var subset []Entry
	for _, e := range entries {
		if e.Ours() && checkFor(e.File).Known == "" && !isSlow(e.File) {
			subset = append(subset, e)
		}
	}
	if len(subset) < 40 {
		t.Fatalf("the subset has %d playbooks; the corpus should give more than 40", len(subset))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	python := os.Getenv("NOETL_PYTHON")
	s, err := Start(ctx, Options{Dir: dir, Python: python, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.RegisterAll(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var outs []Outcome
	for _, e := range subset {
		o := s.Run(ctx, e)
		outs = append(outs, o)
		if !o.Pass {
			t.Errorf("%s: %s (%s) %s", e.File, o.Status, o.Checked, o.Error)
		}
	}
	var report strings.Builder
	sum := Report(&report, outs)
	t.Logf("%d playbooks in %s\n%s", len(outs), time.Since(start).Round(time.Second), report.String())
	if sum.OursPassed != len(subset) {
		t.Errorf("%d of %d passed", sum.OursPassed, len(subset))
	}
}

func isSlow(file string) bool {
	for _, p := range slow {
		if strings.HasPrefix(file, p) || file == p {
			return true
		}
	}
	return false
}
