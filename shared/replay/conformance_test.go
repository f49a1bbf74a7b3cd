package replay

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// conformanceDir resolves the shared conformance folder per R-C1: the
// $NOETL_CONFORMANCE_DIR override, else ../shared/conformance relative to the
// module root (the first ancestor holding go.mod). Missing: fail under CI,
// skip otherwise.
func conformanceDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("NOETL_CONFORMANCE_DIR")
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			t.Fatalf("getwd: %v", err)
		}
		root := wd
		for {
			if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
				break
			}
			parent := filepath.Dir(root)
			if parent == root {
				t.Fatalf("no go.mod above %s", wd)
			}
			root = parent
		}
		dir = filepath.Join(root, "..", "shared", "conformance")
	}
	if _, err := os.Stat(filepath.Join(dir, "replay", "events.json")); err != nil {
		msg := fmt.Sprintf("replay parity data set not found under %s (set NOETL_CONFORMANCE_DIR): %v", dir, err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dir
}

// loadParityRows reads events.json through ReadRows (the streaming loader is
// part of what the parity test covers).
func loadParityRows(t testing.TB) []Row {
	t.Helper()
	f, err := os.Open(filepath.Join(conformanceDir(t), "replay", "events.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []Row
	if err := ReadRows(f, func(r Row) error { rows = append(rows, r); return nil }); err != nil {
		t.Fatalf("ReadRows(events.json): %v", err)
	}
	return rows
}

func loadExpected(t testing.TB) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(conformanceDir(t), "replay", "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := jsonx.DecodeObject(b)
	if err != nil {
		t.Fatalf("expected.json: %v", err)
	}
	return m
}

// fold folds rows and returns the state; stop errors end the fold quietly.
func fold(t testing.TB, opts Options, rows []Row) *State {
	t.Helper()
	f := NewFolder(opts)
	for _, r := range rows {
		if err := f.Add(r); IsStop(err) {
			break
		} else if err != nil {
			t.Fatalf("Add(seq %d): %v", r.Seq, err)
		}
	}
	st, err := f.State()
	if err != nil {
		t.Fatalf("State: %v", err)
	}
	return st
}

// decoded returns the state as the API would serve it, decoded back, so the
// comparison sees exactly the wire document.
func decoded(t testing.TB, st *State) map[string]any {
	t.Helper()
	b, err := st.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	m, err := jsonx.DecodeObject(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// subsetMismatches lists where actual fails to contain expected (R-X1): every
// key of every expected object must be present with a matching value; arrays
// match element by element and must have the same length; checksum hex
// values are not compared (they hash each implementation's canonical form).
func subsetMismatches(path string, expected, actual any) []string {
	switch e := expected.(type) {
	case map[string]any:
		a, ok := actual.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: expected an object, got %s", path, jsonx.TypeName(actual))}
		}
		var out []string
		for _, k := range slices.Sorted(maps.Keys(e)) {
			if k == "checksum" || k == "projection_checksums" || k == "checksum_algorithm" {
				continue
			}
			av, ok := a[k]
			if !ok {
				out = append(out, fmt.Sprintf("%s/%s: missing", path, k))
				continue
			}
			out = append(out, subsetMismatches(path+"/"+k, e[k], av)...)
		}
		return out
	case []any:
		a, ok := actual.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: expected an array, got %s", path, jsonx.TypeName(actual))}
		}
		if len(a) != len(e) {
			return []string{fmt.Sprintf("%s: expected %d elements, got %d", path, len(e), len(a))}
		}
		var out []string
		for i := range e {
			out = append(out, subsetMismatches(fmt.Sprintf("%s/%d", path, i), e[i], a[i])...)
		}
		return out
	default:
		if !reflect.DeepEqual(expected, actual) {
			return []string{fmt.Sprintf("%s: expected %s, got %s", path, jsonx.MustMarshal(expected), jsonx.MustMarshal(actual))}
		}
		return nil
	}
}

// idKeyed are the projections that map entity ids to entities.
var idKeyed = map[string]bool{"commands": true, "frames": true, "stages": true, "loops": true, "business_objects": true}

func TestParityDataSet(t *testing.T) {
	rows := loadParityRows(t)
	expected := loadExpected(t)
	if len(rows) != 13 {
		t.Fatalf("events.json: %d rows, want 13", len(rows))
	}
	got := decoded(t, fold(t, Options{}, rows))

	// Every top-level key of expected.json, one subtest each, so a failure
	// names the projection.
	for _, key := range slices.Sorted(maps.Keys(expected)) {
		t.Run(key, func(t *testing.T) {
			for _, m := range subsetMismatches(key, expected[key], got[key]) {
				t.Error(m)
			}
			// Id-keyed projections hold exactly the expected entities: extra
			// fields inside an entity are fine, a phantom entity is not.
			if e, ok := expected[key].(map[string]any); ok && idKeyed[key] {
				g, _ := got[key].(map[string]any)
				if want, have := slices.Sorted(maps.Keys(e)), slices.Sorted(maps.Keys(g)); !slices.Equal(want, have) {
					t.Errorf("%s ids %v, want %v", key, have, want)
				}
			}
		})
	}

	// Folding only one projection gives the same projection as folding all.
	for _, p := range projections() {
		if _, ok := expected[p.Key]; !ok {
			continue
		}
		t.Run("only_"+string(p.P), func(t *testing.T) {
			single := decoded(t, fold(t, Options{Projection: p.P}, rows))
			for _, m := range subsetMismatches(p.Key, expected[p.Key], single[p.Key]) {
				t.Error(m)
			}
			for _, q := range projections() {
				if _, present := single[q.Key]; present != (q.P == p.P) {
					t.Errorf("projection=%s: key %s present=%v", p.P, q.Key, present)
				}
			}
		})
	}
}

// The comparator must be able to fail, or the parity test proves nothing.
func TestSubsetMismatchesDetectsDifferences(t *testing.T) {
	expected := map[string]any{
		"commands":  map[string]any{"9001": map[string]any{"status": "success", "issued_event_id": int64(104)}},
		"execution": map[string]any{"payload_refs": []any{map[string]any{"event_id": int64(105)}}},
		"checksum":  "aaaa",
	}
	ok := map[string]any{
		"commands":  map[string]any{"9001": map[string]any{"status": "success", "issued_event_id": int64(104), "extra": true}},
		"execution": map[string]any{"payload_refs": []any{map[string]any{"event_id": int64(105), "summary": nil}}},
		"checksum":  "bbbb",
	}
	if m := subsetMismatches("", expected, ok); len(m) != 0 {
		t.Fatalf("superset with other checksum reported: %v", m)
	}
	bad := jsonx.Clone(ok).(map[string]any)
	bad["commands"].(map[string]any)["9001"].(map[string]any)["status"] = "COMPLETED"
	delete(bad["commands"].(map[string]any)["9001"].(map[string]any), "issued_event_id")
	bad["execution"].(map[string]any)["payload_refs"] = []any{}
	m := subsetMismatches("", expected, bad)
	want := []string{
		`/commands/9001/issued_event_id: missing`,
		`/commands/9001/status: expected "success", got "COMPLETED"`,
		`/execution/payload_refs: expected 1 elements, got 0`,
	}
	if !slices.Equal(m, want) {
		t.Fatalf("mismatches:\n%s\nwant:\n%s", strings.Join(m, "\n"), strings.Join(want, "\n"))
	}
}
