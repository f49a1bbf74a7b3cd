package resultstore_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/resultstore"
)

// TestReadsOnlyItsExecution: a reference read for an execution reads only
// that execution's objects (a worker's result under <id>/, a staged result or
// a part under noetl/<id>/), whatever URI a step writes into a later step's
// arguments or a worker posts.
func TestReadsOnlyItsExecution(t *testing.T) {
	st, err := resultstore.Open(context.Background(), "file://"+filepath.Join(t.TempDir(), "r"), resultstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	testOwnExecution(t, st)
}

// testOwnExecution checks the execution rule on st (a directory store here,
// S3 in TestS3).
func testOwnExecution(t *testing.T, st resultstore.Store) {
	t.Helper()
	ctx := context.Background()
	put := func(name, data string) string {
		t.Helper()
		uri, err := st.Put(ctx, name, []byte(data))
		if err != nil {
			t.Fatalf("put %s: %v", name, err)
		}
		return uri
	}
	mine := resultstore.NoETLRef{ExecutionID: 7, Name: "start", ID: "aabbccdd0011"}
	theirs := resultstore.NoETLRef{ExecutionID: 8, Name: "start", ID: "aabbccdd0011"}
	put(mine.Object(), `"staged 7"`)
	put(theirs.Object(), `"staged 8"`)
	own := map[string]string{
		put("7/7:a:1/attempt-1.json", `"worker 7"`): `"worker 7"`,
		mine.String():                            `"staged 7"`,
		resultstore.ObjectURI(st, mine.Object()): `"staged 7"`,
	}
	for uri, want := range own {
		if b, err := resultstore.Resolve(ctx, st, uri, 7); err != nil || string(b) != want {
			t.Errorf("Resolve(%s, 7) = %s, %v; want %s", uri, b, err, want)
		}
	}
	foreign := []string{
		put("8/8:a:1/attempt-1.json", `"worker 8"`),
		resultstore.ObjectURI(st, theirs.Object()),
		theirs.String(),
		// Names that only begin like execution 7's.
		put("70/x.json", `"70"`),
		put("07/x.json", `"07"`),
		put("7a/x.json", `"7a"`),
		put("x/7/y.json", `"x"`),
		put("noetl/x/7/y.json", `"noetl x"`),
		put("noetl/8/7/y.json", `"noetl 8"`),
	}
	for _, uri := range foreign {
		// Refused as ErrOtherExecution, which no retry passes: the server
		// fails the command (422) rather than retrying its report.
		if b, err := resultstore.Resolve(ctx, st, uri, 7); !errors.Is(err, resultstore.ErrOtherExecution) || !strings.Contains(err.Error(), "execution 7") {
			t.Errorf("Resolve(%s, 7) = %s, %v; want it refused as not of execution 7", uri, b, err)
		}
		if v, err := resultstore.ReadJSON(ctx, st, uri+"#", 7); !errors.Is(err, resultstore.ErrOtherExecution) {
			t.Errorf("ReadJSON(%s, 7) = %v, %v; want it refused as ErrOtherExecution", uri, v, err)
		}
		// The server's own reads (GET /api/result/resolve, execution 0)
		// are not scoped to one execution.
		if _, err := resultstore.Resolve(ctx, st, uri, 0); err != nil {
			t.Errorf("Resolve(%s, 0): %v", uri, err)
		}
	}
}

// TestCheckExecutionSaysSameStore: a worker whose store is a folder of its
// server's (server file:///d, worker file:///d/results, as s3://bucket and
// s3://bucket/results) writes names the server reads as results/<id>/…: the
// check refuses them as ErrOtherExecution, saying both must use one URL.
func TestCheckExecutionSaysSameStore(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "r")
	server, err := resultstore.Open(ctx, "file://"+dir, resultstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := resultstore.Open(ctx, "file://"+dir+"/results", resultstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	uri, err := w.Put(ctx, "7/7:a:1/attempt-1.json", []byte(`"worker 7"`))
	if err != nil {
		t.Fatal(err)
	}
	err = resultstore.CheckExecution(server, uri, 7)
	if !errors.Is(err, resultstore.ErrOtherExecution) || !strings.Contains(err.Error(), "same result store URL") {
		t.Fatalf("CheckExecution of a worker's object in a folder of the server's store: %v; want ErrOtherExecution saying to use the same URL", err)
	}
}
