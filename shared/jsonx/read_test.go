package jsonx

import (
	"errors"
	"slices"
	"testing"
)

// id is a field type that reads itself (a Reader): a positive integer.
type id int64

func (i *id) ReadJSON(path string, v any) error {
	n, err := IntegerIn(v, 1, 1<<62)
	if err != nil {
		return Refuse(path, "%s", err.Error())
	}
	*i = id(n)
	return nil
}

type item struct {
	Name string `json:"name" required:"true"`
}

type common struct {
	Note string `json:"note,omitempty"`
}

type request struct {
	common
	Kind    string         `json:"kind" alias:"type"`
	Count   int            `json:"count,omitempty" min:"1" max:"10"`
	On      bool           `json:"on,omitempty"`
	Ratio   float64        `json:"ratio,omitempty"`
	Opts    map[string]any `json:"opts,omitempty" alias:"options"`
	Raw     []any          `json:"raw,omitempty"`
	Any     any            `json:"any,omitempty"`
	Given   *int64         `json:"given,omitempty"`
	Ref     id             `json:"ref,omitempty"`
	Items   []item         `json:"items,omitempty" max:"2" items:"items in one request"`
	IDs     []id           `json:"ids,omitempty"`
	Skipped bool           `json:"skipped,omitempty" ignored:"true"`
}

// Check is the request's rule across fields.
func (r *request) Check(f Fields) error {
	if r.On && r.Count == 0 {
		return Refuse(f.Name("count"), "required when on")
	}
	return nil
}

func decodeObj(t *testing.T, s string) map[string]any {
	t.Helper()
	m, err := DecodeObject([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRead reads every kind of field Read knows, and refuses each wrongly
// given one with the message naming its path.
func TestRead(t *testing.T) {
	var r request
	err := Read(Fields{M: decodeObj(t, `{"note": "n", "type": "k", "count": "3", "on": true, "ratio": 2, "options": {"a": 1},
		"raw": [1, "x"], "any": [true], "given": 0, "ref": 7, "items": [{"name": "a"}], "ids": ["4", 5], "skipped": "not read"}`)}, &r)
	if err != nil {
		t.Fatal(err)
	}
	if r.Note != "n" || r.Kind != "k" || r.Count != 3 || !r.On || r.Ratio != 2 || r.Opts["a"] != int64(1) || len(r.Raw) != 2 ||
		r.Given == nil || *r.Given != 0 || r.Ref != 7 || len(r.Items) != 1 || r.Items[0].Name != "a" || len(r.IDs) != 2 || r.IDs[1] != 5 || r.Skipped {
		t.Errorf("read %+v", r)
	}
	var empty request
	if err := Read(Fields{M: decodeObj(t, `{"given": null, "kind": null}`)}, &empty); err != nil || empty.Given != nil || empty.Kind != "" {
		t.Errorf("null is absent: %+v, %v", empty, err)
	}

	for body, want := range map[string]string{
		`{"kind": "a", "type": "b"}`:            "type: is an alias of kind; give one of them",
		`{"kind": 1}`:                           "kind: expected string, got number",
		`{"count": 0}`:                          "count: 0 is below the minimum of 1",
		`{"count": 11}`:                         "count: 11 is over the maximum of 10",
		`{"count": 1.5}`:                        "count: expected integer, got number 1.5",
		`{"count": "many"}`:                     `count: expected integer, got "many"`,
		`{"on": "yes"}`:                         "on: expected boolean, got string",
		`{"on": true}`:                          "count: required when on",
		`{"ratio": "1"}`:                        "ratio: expected number, got string",
		`{"options": []}`:                       "options: expected object, got array",
		`{"raw": {}}`:                           "raw: expected array, got object",
		`{"given": true}`:                       "given: expected integer, got boolean",
		`{"ref": 0}`:                            "ref: 0 is below the minimum of 1",
		`{"items": [{"name": "a"}, {}]}`:        "items[1].name: required",
		`{"items": [{"name": ""}]}`:             "items[0].name: must not be empty",
		`{"items": [3]}`:                        "items[0]: expected object, got number",
		`{"ids": [1, "x"]}`:                     `ids[1]: expected integer, got "x"`,
		`{"note": 5}`:                           "note: expected string, got number",
		`{"items": [{"name": "a", "x": 1}, 2]}`: "items[1]: expected object, got number",
	} {
		var r request
		err := Read(Fields{M: decodeObj(t, body)}, &r)
		var fe *FieldError
		if !errors.As(err, &fe) || err.Error() != want {
			t.Errorf("%s: %v, want the FieldError %q", body, err, want)
		}
	}

	err = Read(Fields{Prefix: "events[2]", M: decodeObj(t, `{"items": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}`)}, &r)
	var tm *TooMany
	if !errors.As(err, &tm) || err.Error() != "events[2].items: 3 items in one request; the limit is 2" {
		t.Errorf("over the limit: %v, want a TooMany naming the path", err)
	}
}

// TestReadTopLevelReader: a request type that reads itself gets the whole
// object (NoETL's bodies of several shapes).
func TestReadTopLevelReader(t *testing.T) {
	var whole wholeBody
	if err := Read(Fields{M: decodeObj(t, `{"a": 1, "b": 2}`)}, &whole); err != nil || whole.keys != 2 {
		t.Errorf("read %d keys, %v; want 2", whole.keys, err)
	}
}

type wholeBody struct{ keys int }

func (w *wholeBody) ReadJSON(_ string, v any) error {
	w.keys = len(v.(map[string]any))
	return nil
}

// TestNames lists the JSON names Read reads, embedded fields inline.
func TestNames(t *testing.T) {
	got := Names(&request{})
	want := []string{"note", "kind", "count", "on", "ratio", "opts", "raw", "any", "given", "ref", "items", "ids", "skipped"}
	if !slices.Equal(got, want) {
		t.Errorf("Names = %v, want %v", got, want)
	}
}
