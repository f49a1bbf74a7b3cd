package replay

import (
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/jsonx"
)

func TestDiffBetweenCutoffs(t *testing.T) {
	rows := loadParityRows(t)
	a := fold(t, Options{Cutoff: Cutoff{Kind: CutoffEventID, EventID: 109}}, rows)
	b := fold(t, Options{Cutoff: Cutoff{Kind: CutoffEventID, EventID: 112}}, rows)
	var got []string
	for _, c := range Diff(a, b) {
		got = append(got, string(jsonx.MustMarshal(c)))
	}
	want := []string{
		`{"after":"Alice S.","before":"Alice","op":"replace","path":"/business_objects/customer~1c-99/attributes/name"}`,
		`{"after":2,"before":1,"op":"replace","path":"/business_objects/customer~1c-99/event_count"}`,
		`{"after":110,"before":109,"op":"replace","path":"/business_objects/customer~1c-99/last_event_id"}`,
		`{"after":"customer.updated","before":"customer.created","op":"replace","path":"/business_objects/customer~1c-99/last_event_type"}`,
		`{"after":2,"before":1,"op":"replace","path":"/business_objects/customer~1c-99/version"}`,
		`{"after":13,"before":10,"op":"replace","path":"/event_count"}`,
		`{"after":"COMPLETED","before":"RUNNING","op":"replace","path":"/execution/status"}`,
		`{"after":112,"before":109,"op":"replace","path":"/last_event_id"}`,
		`{"after":"playbook.completed","before":"customer.created","op":"replace","path":"/last_event_type"}`,
		`{"after":13,"before":10,"op":"replace","path":"/last_seq"}`,
		`{"after":111,"before":null,"op":"replace","path":"/stages/s-1/closed_event_id"}`,
		`{"after":111,"before":106,"op":"replace","path":"/stages/s-1/last_event_id"}`,
		`{"after":"CLOSED","before":"success","op":"replace","path":"/stages/s-1/status"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("diff:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if d := Diff(b, b); len(d) != 0 {
		t.Fatalf("diff of a state with itself: %v", d)
	}
}

func TestDiffAddRemoveAndArrays(t *testing.T) {
	rows := loadParityRows(t)
	early := fold(t, Options{Cutoff: Cutoff{Kind: CutoffPosition, Position: 4}}, rows)
	late := fold(t, Options{Cutoff: Cutoff{Kind: CutoffPosition, Position: 6}}, rows)
	changes := Diff(early, late)
	find := func(path string) *Change {
		for i := range changes {
			if changes[i].Path == path {
				return &changes[i]
			}
		}
		return nil
	}
	// frame.committed (seq 6) appends the first payload ref: one add at index 0.
	if c := find("/execution/payload_refs/0"); c == nil || c.Op != OpAdd || c.Before != nil {
		t.Fatalf("payload_refs/0: %+v", c)
	}
	// The command first appears at seq 4 (frame.dispatched names it) — so it is
	// a replace of fields, while removing it is one "remove" of the subtree.
	back := Diff(late, fold(t, Options{Cutoff: Cutoff{Kind: CutoffPosition, Position: 2}}, rows))
	var removed []string
	for _, c := range back {
		if c.Op == OpRemove {
			removed = append(removed, c.Path)
			if c.After != nil {
				t.Errorf("remove %s carries after=%v", c.Path, c.After)
			}
		}
	}
	want := "/commands/9001 /execution/payload_refs/0 /frames/f-1 /stages/s-1"
	if strings.Join(removed, " ") != want {
		t.Fatalf("removed %v, want %s", removed, want)
	}
	// A remove has no "after" key on the wire; an add has no "before".
	for _, c := range back {
		if c.Op == OpRemove && strings.Contains(string(jsonx.MustMarshal(c)), `"after"`) {
			t.Errorf("remove serialised with after: %s", jsonx.MustMarshal(c))
		}
	}
	// nil is the empty document: everything is an add.
	for _, c := range Diff(nil, early) {
		if c.Op != OpAdd {
			t.Fatalf("Diff(nil, s) produced %s %s", c.Op, c.Path)
		}
	}
}
