package parser_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/playbook/parser"
)

// corpusRefused lists every playbook of NoETL's public corpus
// (../shared/conformance/noetl-e2e/playbooks) this server refuses, with the error
// that must name the reason. None is a form NoETL accepts and this project could
// support: each is refused by NoETL too (issue 12). Everything else must validate.
var corpusRefused = map[string]string{
	// The corpus's own negative fixture: a step without tool.
	"broken_playbooks/should_error_tool_is_required.yaml": `step "end" has no tool`,
	// A bare `- step: end` has no tool either; NoETL refuses that form, as the
	// fixture above pins ("tool is required for all workflow steps").
	"spike/spike_e2e_test.yaml":        `step "end" has no tool`,
	"spike/spike_failing_subflow.yaml": `step "end" has no tool`,
	// '{{`{{json .}}`}}' is Go-template escaping, not Jinja: NoETL's Jinja
	// rejects the backtick just as our template front does.
	"deployment/deploy_gateway_kind.yaml": "unexpected character '`'",
}

// corpusUnsupported lists the playbooks that register but use a feature this
// server does not run, other than a tool kind (R-N1): the step using it fails
// when dispatched, naming the feature. Each must carry exactly that warning.
var corpusUnsupported = map[string]string{
	"oauth/google_gcs/google_gcs_oauth.yaml":                 "token() is not supported",
	"oauth/google_secret_manager/google_secret_manager.yaml": "token() is not supported",
}

// r1Kind reads the kind out of an R-N1 tool kind warning.
var r1Kind = regexp.MustCompile(`^tool kind "([^"]+)" is not supported by this server`)

// TestNoETLCorpus validates NoETL's whole public playbook corpus, read in place:
// every playbook outside broken_playbooks/ validates or is in corpusRefused with
// its reason; everything in broken_playbooks/ is refused.
//
// Rules for files that are not one playbook: a YAML file whose kind is not
// Playbook (a Credential) is not part of the corpus and is listed, not parsed;
// a file with several documents is refused by the parser (one playbook per
// file, as NoETL's register reads it). The corpus holds neither today; the test
// says so if that changes.
func TestNoETLCorpus(t *testing.T) {
	root := filepath.Join(conformanceDir(t), "noetl-e2e", "playbooks")
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 150 {
		t.Fatalf("found %d YAML files under %s; the corpus has 162", len(files), root)
	}
	sort.Strings(files)

	kindLine := regexp.MustCompile(`(?m)^kind:\s*(\S+)`)
	var validated, refused, notPlaybooks int
	unsupportedKinds := map[string]int{}
	seenRefused := map[string]bool{}
	for _, f := range files {
		rel := filepath.ToSlash(strings.TrimPrefix(f, root+string(filepath.Separator)))
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if m := kindLine.FindSubmatch(src); m != nil && string(m[1]) != "Playbook" {
			notPlaybooks++
			t.Logf("%s: kind %s is not a playbook; not validated", rel, m[1])
			continue
		}
		pb, diags := parser.Parse(src)
		errs := diags.Errors()
		want, mustRefuse := corpusRefused[rel]
		broken := strings.HasPrefix(rel, "broken_playbooks/")
		switch {
		case broken && !mustRefuse:
			t.Errorf("%s is in broken_playbooks/ but not listed in corpusRefused", rel)
		case mustRefuse:
			seenRefused[rel] = true
			refused++
			if pb != nil || len(errs) == 0 {
				t.Errorf("%s: want refused with %q, but it validates", rel, want)
				continue
			}
			// Exactly one reason: every error names the same one.
			for _, e := range errs {
				if !strings.Contains(e.Message, want) {
					t.Errorf("%s: want every error to name %q, got %s", rel, want, e)
				}
			}
		case len(errs) > 0 || pb == nil:
			t.Errorf("%s: NoETL accepts it, we refuse it:\n%v", rel, errs)
		default:
			validated++
		}
		var unsupported []string
		for _, w := range diags.Warnings() {
			if m := r1Kind.FindStringSubmatch(w.Message); m != nil {
				unsupportedKinds[m[1]]++
			} else if strings.Contains(w.Message, "R-N1") {
				unsupported = append(unsupported, w.Message)
			}
		}
		if feature, ok := corpusUnsupported[rel]; ok {
			if len(unsupported) == 0 || !slices.ContainsFunc(unsupported, func(m string) bool { return strings.Contains(m, feature) }) {
				t.Errorf("%s: want a warning naming %q, got %v", rel, feature, unsupported)
			}
		} else if len(unsupported) > 0 && !mustRefuse {
			t.Errorf("%s: unsupported features not listed in corpusUnsupported: %v", rel, unsupported)
		}
	}
	for rel := range corpusRefused {
		if !seenRefused[rel] {
			t.Errorf("corpusRefused lists %s, which is not in the corpus", rel)
		}
	}
	if notPlaybooks != 0 {
		t.Errorf("%d corpus files are not playbooks (see the log): decide whether they belong in the corpus", notPlaybooks)
	}
	t.Logf("%d files: %d validate (%d of them using a feature listed in corpusUnsupported), %d refused as listed; tool kinds that register and fail at dispatch (R-N1): %v",
		len(files), validated, len(corpusUnsupported), refused, unsupportedKinds)
	if validated+refused != len(files) {
		t.Errorf("validated %d + refused %d != %d files", validated, refused, len(files))
	}
}
