package api

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// The SAM template (template.yaml) is hand-written except for each function's
// HttpApi events, which SAMTemplate writes from Routes between two marker
// comments under the function's Events: key:
//
//	Events:
//	  # BEGIN routes of catalog: generated from shared/api/routes.go by `make generate`; do not edit
//	  ...
//	  # END routes of catalog
//
// Text markers rather than a YAML round trip: re-encoding the template would
// lose its comments, layout and short-form tags (!Ref, !Sub), and every line
// outside the regions must stay byte for byte as written. Other events of a
// function (the outbox's schedule) stay outside the region.
const (
	samBegin = "# BEGIN routes of "
	samEnd   = "# END routes of "
)

// FunctionLogicalID is the CloudFormation logical id of a function's resource
// in template.yaml and the CDK stack: "catalog" -> "CatalogFunction".
func FunctionLogicalID(fn string) string {
	return camel(fn) + "Function"
}

// EventLogicalID is the logical id of a route's HttpApi event: the method and
// each word of the path in CamelCase, parameters without braces, so
// "POST /api/commands/{event_id}/claim" -> "PostApiCommandsEventIdClaim" and
// "GET /" -> "GetRoot".
func EventLogicalID(r Route) string {
	id := camel(strings.ToLower(r.Method)) + camel(r.GatewayPath())
	if r.Path == "/" {
		id += "Root"
	}
	return id
}

// camel joins the alphanumeric words of s, each with its first letter upper
// case (CloudFormation logical ids are alphanumeric).
func camel(s string) string {
	var b strings.Builder
	for _, w := range strings.FieldsFunc(s, func(r rune) bool {
		return r > unicode.MaxASCII || !(unicode.IsLetter(r) || unicode.IsDigit(r))
	}) {
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}

// SAMTemplate returns template (template.yaml's text) with every function's
// route region rewritten from Routes; every other line is kept as it is. It
// fails, naming the fix, when a function with routes has no region, a region
// is repeated, unterminated, names an unknown function or sits under another
// function's resource, or two routes of a function get the same event id.
func SAMTemplate(template []byte) ([]byte, error) {
	byFn := map[string][]Route{}
	for _, r := range Routes() {
		byFn[r.Function] = append(byFn[r.Function], r)
	}
	var out bytes.Buffer
	done := map[string]bool{}
	resource := "" // the resource the current line belongs to
	lines := strings.SplitAfter(string(template), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if isResourceKey(line) {
			resource = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(line), ":"))
		}
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, samEnd) {
			return nil, fmt.Errorf("template.yaml line %d: %q has no BEGIN line before it", i+1, trimmed)
		}
		if !strings.HasPrefix(trimmed, samBegin) {
			out.WriteString(line)
			continue
		}
		fn, _, _ := strings.Cut(strings.TrimPrefix(trimmed, samBegin), ":")
		fn = strings.TrimSpace(fn)
		if !slices.Contains(Functions(), fn) {
			return nil, fmt.Errorf("template.yaml line %d: routes of %q: no such function (one of %s)", i+1, fn, strings.Join(Functions(), ", "))
		}
		if want := FunctionLogicalID(fn); resource != want {
			return nil, fmt.Errorf("template.yaml line %d: the routes of %s sit under resource %q: move the region under %s's Events:", i+1, fn, resource, want)
		}
		if done[fn] {
			return nil, fmt.Errorf("template.yaml line %d: a second region of %s's routes: keep one", i+1, fn)
		}
		done[fn] = true
		end := slices.IndexFunc(lines[i+1:], func(l string) bool {
			t := strings.TrimSpace(l)
			return strings.HasPrefix(t, samEnd) || strings.HasPrefix(t, samBegin)
		})
		if end < 0 || strings.TrimSpace(lines[i+1+end]) != samEnd+fn {
			return nil, fmt.Errorf("template.yaml line %d: the routes of %s have no %q line after them", i+1, fn, samEnd+fn)
		}
		indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
		if err := writeEvents(&out, indent, fn, byFn[fn]); err != nil {
			return nil, err
		}
		i += 1 + end
	}
	for _, fn := range Functions() {
		if len(byFn[fn]) > 0 && !done[fn] {
			return nil, fmt.Errorf("template.yaml has no region for the routes of %s: add the two lines %q and %q under %s's Events:, then run make generate",
				fn, samBegin+fn, samEnd+fn, FunctionLogicalID(fn))
		}
	}
	return out.Bytes(), nil
}

// isResourceKey reports whether line opens a top-level section's entry (two
// spaces of indent): under Resources:, a resource's logical id.
func isResourceKey(line string) bool {
	rest, ok := strings.CutPrefix(line, "  ")
	return ok && rest != "" && rest[0] != ' ' && rest[0] != '#' && strings.HasSuffix(strings.TrimRight(rest, " \r\n"), ":")
}

// writeEvents writes one region: its markers and an HttpApi event per route.
func writeEvents(out *bytes.Buffer, indent, fn string, routes []Route) error {
	fmt.Fprintf(out, "%s%s%s: generated from shared/api/routes.go by `make generate`; do not edit\n", indent, samBegin, fn)
	seen := map[string]string{}
	for _, r := range routes {
		id := EventLogicalID(r)
		if other, dup := seen[id]; dup {
			return fmt.Errorf("routes %s and %s of %s both get the event id %s: change one path", other, r.Key(), fn, id)
		}
		seen[id] = r.Key()
		fmt.Fprintf(out, "%s%s:\n", indent, id)
		fmt.Fprintf(out, "%s  Type: HttpApi\n", indent)
		fmt.Fprintf(out, "%s  Properties:\n", indent)
		fmt.Fprintf(out, "%s    ApiId: !Ref HttpApi\n", indent)
		fmt.Fprintf(out, "%s    Method: %s\n", indent, r.Method)
		fmt.Fprintf(out, "%s    Path: %s\n", indent, r.GatewayPath())
	}
	fmt.Fprintf(out, "%s%s%s\n", indent, samEnd, fn)
	return nil
}
