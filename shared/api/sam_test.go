package api_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/api"
)

// TestSAMTemplateCORS: API Gateway answers for CORS in AWS (it drops the
// functions' CORS headers), so template.yaml exposes every header the API
// does, and lets any method through a preflight as the local gateway does.
func TestSAMTemplateCORS(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	_, line, _ := strings.Cut(text, "ExposeHeaders: [")
	line, _, _ = strings.Cut(line, "]")
	for _, h := range api.ExposedHeaders() {
		if !slices.Contains(strings.Split(line, ", "), strings.ToLower(h)) {
			t.Errorf("template.yaml's CorsConfiguration does not expose %s (ExposeHeaders: [%s])", h, line)
		}
	}
	if !strings.Contains(text, `AllowMethods: ["*"]`) {
		t.Error(`template.yaml's CorsConfiguration does not allow every method (AllowMethods: ["*"])`)
	}
}

func TestEventLogicalID(t *testing.T) {
	cases := map[string]string{
		"GET /":                                       "GetRoot",
		"GET /api/catalog/{catalog_id}":               "GetApiCatalogCatalogId",
		"POST /api/commands/{event_id}/claim":         "PostApiCommandsEventIdClaim",
		"GET /api/openapi.json":                       "GetApiOpenapiJson",
		"GET /api/internal/outbox/pending-count":      "GetApiInternalOutboxPendingCount",
		"GET /api/executions/{id}/cancellation-check": "GetApiExecutionsIdCancellationCheck",
		"GET /ui/{asset}":                             "GetUiAsset",
	}
	for key, want := range cases {
		method, path, _ := strings.Cut(key, " ")
		if got := api.EventLogicalID(api.Route{Method: method, Path: path}); got != want {
			t.Errorf("EventLogicalID(%s) = %s, want %s", key, got, want)
		}
	}
	if got := api.FunctionLogicalID(api.FnOutbox); got != "OutboxFunction" {
		t.Errorf("FunctionLogicalID(outbox) = %s", got)
	}
	// Event ids are unique across the table: SAM names each route's Lambda
	// permission after its function and event id.
	seen := map[string]string{}
	for _, r := range api.Routes() {
		id := api.EventLogicalID(r)
		if other, dup := seen[id]; dup {
			t.Errorf("routes %s and %s share the event id %s", other, r.Key(), id)
		}
		seen[id] = r.Key()
	}
}

// samSkeleton is a template with a region for every function; extra is
// placed in the outbox function's Events: before its region.
func samSkeleton(extra string) string {
	var b strings.Builder
	b.WriteString("# a comment the generator keeps\nResources:\n")
	for _, fn := range api.Functions() {
		b.WriteString("  " + api.FunctionLogicalID(fn) + ":\n    Type: AWS::Serverless::Function\n    Properties:\n      CodeUri: . # kept\n      Events:\n")
		if fn == api.FnOutbox {
			b.WriteString(extra)
		}
		b.WriteString("        # BEGIN routes of " + fn + "\n        Stale:\n          Type: HttpApi\n        # END routes of " + fn + "\n")
	}
	b.WriteString("Outputs: {}\n")
	return b.String()
}

func TestSAMTemplateRewritesOnlyRegions(t *testing.T) {
	hand := "        Drain:\n          Type: Schedule\n"
	src := samSkeleton(hand)
	out, err := api.SAMTemplate([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	if strings.Contains(got, "Stale:") {
		t.Error("the region's old lines survived the rewrite")
	}
	for _, keep := range []string{"# a comment the generator keeps\n", "      CodeUri: . # kept\n", hand, "Outputs: {}\n"} {
		if strings.Count(got, keep) != strings.Count(src, keep) {
			t.Errorf("hand-written line %q: %d in the output, %d in the input", keep, strings.Count(got, keep), strings.Count(src, keep))
		}
	}
	// Every route is in its own function's region, with its method and path.
	for _, r := range api.Routes() {
		block := "        " + api.EventLogicalID(r) + ":\n          Type: HttpApi\n          Properties:\n            ApiId: !Ref HttpApi\n" +
			"            Method: " + r.Method + "\n            Path: " + r.GatewayPath() + "\n"
		i := strings.Index(got, block)
		if i < 0 {
			t.Errorf("route %s: no event %q", r.Key(), block)
			continue
		}
		begin := strings.LastIndex(got[:i], "# BEGIN routes of ")
		if fn, _, _ := strings.Cut(got[begin+len("# BEGIN routes of "):], ":"); fn != r.Function {
			t.Errorf("route %s is in the region of %s, want %s", r.Key(), fn, r.Function)
		}
	}
	if n := strings.Count(got, "Type: HttpApi\n"); n != len(api.Routes()) {
		t.Errorf("%d HttpApi events, want one per route (%d)", n, len(api.Routes()))
	}
	again, err := api.SAMTemplate(out)
	if err != nil || string(again) != got {
		t.Errorf("a second run changed the template (err %v)", err)
	}
}

func TestSAMTemplateRefusesBadRegions(t *testing.T) {
	ok := samSkeleton("")
	cases := []struct {
		name, src, want string
	}{
		{"a function without a region",
			strings.Replace(ok, "        # BEGIN routes of claim\n        Stale:\n          Type: HttpApi\n        # END routes of claim\n", "", 1),
			"no region for the routes of claim"},
		{"no END line",
			strings.Replace(ok, "        # END routes of claim\n", "", 1),
			`routes of claim have no "# END routes of claim" line`},
		{"END of another function",
			strings.Replace(ok, "        # END routes of claim\n", "        # END routes of status\n", 1),
			`routes of claim have no "# END routes of claim" line`},
		{"END without BEGIN",
			strings.Replace(ok, "        # BEGIN routes of claim\n", "", 1),
			`"# END routes of claim" has no BEGIN line`},
		{"unknown function",
			strings.Replace(ok, "routes of claim", "routes of nope", 2),
			`routes of "nope": no such function`},
		{"region under another resource",
			strings.Replace(ok, "routes of claim", "routes of execute", 2),
			"the routes of execute sit under resource \"ClaimFunction\""},
		{"a second region",
			strings.Replace(ok, "      Events:\n        # BEGIN routes of execute\n",
				"      Events:\n        # BEGIN routes of execute\n        # END routes of execute\n        # BEGIN routes of execute\n", 1),
			"a second region of execute's routes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.src == ok {
				t.Fatal("the case did not change the template")
			}
			_, err := api.SAMTemplate([]byte(c.src))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}
