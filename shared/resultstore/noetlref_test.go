package resultstore_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/resultstore"
)

// TestNoETLRef: noetl:// references round-trip (a name with slashes
// included), name one object of their execution in the store, and resolve
// only for that execution.
func TestNoETLRef(t *testing.T) {
	ref := resultstore.NoETLRef{ExecutionID: 1024, Name: "fixtures/playbooks/hello world", ID: "ab12cd34ef56"}
	uri := ref.String()
	if uri != "noetl://execution/1024/result/fixtures%2Fplaybooks%2Fhello%20world/ab12cd34ef56" {
		t.Fatalf("uri %q", uri)
	}
	got, err := resultstore.ParseNoETLRef(uri)
	if err != nil || got != ref {
		t.Fatalf("parse: %+v %v", got, err)
	}
	if o := ref.Object(); o != "noetl/1024/fixtures_playbooks_hello_world-ab12cd34ef56.json" {
		t.Fatalf("object %q", o)
	}
	for _, bad := range []string{"noetl://execution/x/result/a/ab12cd34", "noetl://execution/1/result/a", "noetl://execution/1/results/a/ab12cd34",
		"noetl://execution/1/result/a/XYZ", "noetl://default/default/results/1/a/0/0/1"} {
		if _, err := resultstore.ParseNoETLRef(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	ctx := context.Background()
	st, err := resultstore.Open(ctx, "file://"+filepath.Join(t.TempDir(), "r"), resultstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, ref.Object(), []byte(`{"data": 1}`)); err != nil {
		t.Fatal(err)
	}
	if b, err := resultstore.Resolve(ctx, st, uri, 1024); err != nil || string(b) != `{"data": 1}` {
		t.Fatalf("resolve: %s %v", b, err)
	}
	if _, err := resultstore.Resolve(ctx, st, uri, 2048); err == nil || !strings.Contains(err.Error(), "not of execution 2048") {
		t.Fatalf("another execution's reference: %v", err)
	}
	if _, err := resultstore.Resolve(ctx, st, "file:///etc/passwd", 0); err == nil {
		t.Fatal("a file outside the store resolved")
	}
}
