package parser

import (
	"reflect"
	"strings"
	"testing"
)

const formPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: form, path: tests/form, description: "Says hello"}
defaults: &d {retries: 2}
workload:
  name: world        # ui:description=Who to greet
  count: 3
  ratio: 0.5
  loud: false
  token: abc         # ui:secret # ui:credential=pg_*
  mode: fast         # ui:enum=[fast, 'slow']
  tags: [a, b]
  nothing: null
  db:                # ui:description=Where
    host: localhost  # ui:secret
    port: 5432
  <<: *d
workflow:
  - step: start
    tool: {kind: noop}
`

// TestWorkloadForm: one field per workload key in document order, kinds from
// the values, nested mappings as children, NoETL's # ui: directives on
// top-level keys only, merge keys expanded.
func TestWorkloadForm(t *testing.T) {
	fields, diags := WorkloadForm([]byte(formPlaybook))
	if fields == nil {
		t.Fatalf("no form: %v", diags)
	}
	var got []string
	for _, f := range fields {
		got = append(got, f.Name+":"+f.Kind)
	}
	want := "name:string count:integer ratio:number loud:boolean token:string mode:enum tags:array nothing:null db:object retries:integer"
	if strings.Join(got, " ") != want {
		t.Fatalf("fields %v, want %s", got, want)
	}
	by := map[string]FormField{}
	for _, f := range fields {
		by[f.Name] = f
	}
	if f := by["name"]; f.Default != "world" || f.Description != "Who to greet" || f.Secret {
		t.Errorf("name: %+v", f)
	}
	if f := by["count"]; f.Default != int64(3) {
		t.Errorf("count default %#v", f.Default)
	}
	if f := by["token"]; !f.Secret || f.Credential != "pg_*" || f.Default != "abc" {
		t.Errorf("token: %+v", f)
	}
	if f := by["mode"]; !reflect.DeepEqual(f.Options, []any{"fast", "slow"}) || f.Default != "fast" {
		t.Errorf("mode: %+v", f)
	}
	db := by["db"]
	if db.Description != "Where" || len(db.Children) != 2 || db.Children[0].Name != "host" || db.Children[1].Kind != "integer" {
		t.Fatalf("db: %+v", db)
	}
	if db.Children[0].Secret {
		t.Error("a directive on a nested key applied (NoETL reads top-level keys only)")
	}
	if !reflect.DeepEqual(db.Default, map[string]any{"host": "localhost", "port": int64(5432)}) {
		t.Errorf("db default %#v", db.Default)
	}

	// No workload: no fields (not nil). Unreadable: nil with the problem.
	if f, _ := WorkloadForm([]byte("apiVersion: noetl.io/v2\nworkflow: []\n")); f == nil || len(f) != 0 {
		t.Errorf("no workload: %v", f)
	}
	if f, d := WorkloadForm([]byte("a: [")); f != nil || !d.HasErrors() {
		t.Errorf("bad YAML: %v %v", f, d)
	}
}

// TestDocument: the whole playbook as a JSON value, aliases expanded, and
// the expansion limits hold.
func TestDocument(t *testing.T) {
	doc, diags := Document([]byte(formPlaybook))
	if doc == nil {
		t.Fatalf("no document: %v", diags)
	}
	md := doc["metadata"].(map[string]any)
	if md["description"] != "Says hello" || len(doc["workflow"].([]any)) != 1 {
		t.Errorf("document %v", doc)
	}
	if doc["workload"].(map[string]any)["retries"] != int64(2) {
		t.Errorf("the merge key was not expanded: %v", doc["workload"])
	}
	bomb := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	for i := range 8 {
		prev := string(rune('a' + i))
		next := string(rune('b' + i))
		bomb += next + ": &" + next + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n"
	}
	if d, diags := Document([]byte(bomb)); d != nil || !diags.HasErrors() {
		t.Errorf("an alias bomb was read: %v", diags)
	}
}
