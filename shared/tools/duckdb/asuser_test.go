//go:build linux

package duckdb_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/toolresult"
	"github.com/noetl-go/noetl/shared/tools"
	"github.com/noetl-go/noetl/shared/tools/duckdb"
)

var _ tools.SQLEngineAsUser = (*duckdb.Engine)(nil)

// nobody is the tool user of these tests; they need root (CI runs as root:
// there a test that cannot run fails).
func nobody(t *testing.T) *tools.User {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("running duckdb as the tool user needs root, and CI is set: run the tests as root")
		}
		t.Skip("running duckdb as the tool user needs root")
	}
	u, err := tools.LookupUser("nobody")
	if err != nil || u == nil {
		t.Fatalf("LookupUser(nobody) = %v, %v", u, err)
	}
	return u
}

// openDir is a fresh folder anyone may enter (t.TempDir's parent is root's
// alone), removed after the test.
func openDir(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func owner(t *testing.T, path string) uint32 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Uid
}

// TestDuckDBAsToolUser (issue 33, finding 2): with a tool user, duckdb runs
// in a helper process as that user, so SQL cannot read a root-only file
// (read_csv, a script file, the database itself), nor write where that user
// may not (COPY … TO, a new database file); files it may use work, and the
// execution's database file is the tool user's. Statements, parameters,
// streaming reads (transfer), concurrent steps on one file and a cancelled
// statement all go through the helper.
func TestDuckDBAsToolUser(t *testing.T) {
	u := nobody(t)
	dataDir := filepath.Join(openDir(t, "noetl-data-"), "data")
	r := tools.New(tools.Options{DuckDB: duckdb.New(), DataDir: dataDir, User: u})
	root := openDir(t, "noetl-root-only-")
	secret := filepath.Join(root, "secret.csv")
	if err := os.WriteFile(secret, []byte("id,value\n1,root-only-value-4711\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	public := filepath.Join(root, "public.csv")
	if err := os.WriteFile(public, []byte("id,value\n1,anyone\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "secret.sql")
	if err := os.WriteFile(script, []byte("SELECT 'root-only-script-4711' AS v"), 0o600); err != nil {
		t.Fatal(err)
	}
	noLeak := func(env toolresult.Envelope) {
		t.Helper()
		if all := fmt.Sprint(env.Error, env.Data); strings.Contains(all, "-4711") {
			t.Fatalf("a root-only file leaked: %s", all)
		}
	}

	same(t, "a file the tool user may read", ok(t, run(t, r, "1", map[string]any{"kind": "duckdb",
		"query": fmt.Sprintf("SELECT * FROM read_csv('%s')", public)}))["rows"], []any{map[string]any{"id": 1, "value": "anyone"}})
	for _, q := range []string{
		fmt.Sprintf("SELECT * FROM read_csv('%s')", secret),
		fmt.Sprintf("SELECT * FROM read_text('%s')", secret),
		fmt.Sprintf("SELECT content FROM read_blob('%s')", secret),
	} {
		env := run(t, r, "1", map[string]any{"kind": "duckdb", "query": q})
		failed(t, env, "Permission denied")
		noLeak(env)
	}
	env := run(t, r, "1", map[string]any{"kind": "duckdb", "script": script})
	failed(t, env, "Permission denied", "read as the tool user nobody")
	noLeak(env)

	out := filepath.Join(root, "out.csv")
	failed(t, run(t, r, "1", map[string]any{"kind": "duckdb", "query": fmt.Sprintf("COPY (SELECT 1 AS x) TO '%s'", out)}), "Permission denied")
	rootDB := filepath.Join(root, "new.duckdb")
	failed(t, run(t, r, "1", map[string]any{"kind": "duckdb", "database": rootDB, "query": "SELECT 1"}), "Permission denied")
	for _, p := range []string{out, rootDB} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s was written (%v)", p, err)
		}
	}

	// The execution's own file: created by, and owned by, the tool user.
	data := ok(t, run(t, r, "7", map[string]any{"kind": "duckdb", "query": "CREATE TABLE n (i INTEGER); INSERT INTO n SELECT * FROM range(2500)"}))
	if got := owner(t, data["database"].(string)); got != u.UID {
		t.Fatalf("the execution's database file is owned by uid %d, want the tool user's %d", got, u.UID)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 10)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if env := run(t, r, "7", map[string]any{"kind": "duckdb", "query": "INSERT INTO n VALUES ($1)", "params": []any{10000 + i}}); env.Status != toolresult.StatusSuccess {
				errs <- env.Error.Message
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}

	// Streaming reads: duckdb → postgres in chunks; a failing chunk stops
	// the read and leaves the target as it was.
	dsn := devstacktest.Postgres(t, 0).ClusterDSN
	ok(t, run(t, r, "7", map[string]any{"kind": "postgres", "connection": dsn, "query": "CREATE TABLE n (i int PRIMARY KEY)"}))
	moved := ok(t, run(t, r, "7", map[string]any{"kind": "transfer", "chunk_size": 1000,
		"source": map[string]any{"type": "duckdb", "query": "SELECT i FROM n ORDER BY i"},
		"target": map[string]any{"type": "postgres", "connection": dsn, "table": "n"}}))
	if moved["rows_transferred"] != int64(2510) || moved["chunks_processed"] != int64(3) {
		t.Fatalf("duckdb → postgres through the helper: %v", moved)
	}
	failed(t, run(t, r, "7", map[string]any{"kind": "transfer", "chunk_size": 1000,
		"source": map[string]any{"type": "duckdb", "query": "SELECT i FROM n"},
		"target": map[string]any{"type": "postgres", "connection": dsn, "table": "n"}}), "duplicate key")
	same(t, "postgres rows", ok(t, run(t, r, "7", map[string]any{"kind": "postgres", "connection": dsn, "query": "SELECT count(*) AS n FROM n"}))["rows"],
		[]any{map[string]any{"n": 2510}})

	// A statement past its timeout is interrupted in the helper, which
	// serves the next step.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx = tools.WithCall(ctx, tools.Call{ExecutionID: "8", Step: "s"})
	slow := r.Exec(ctx, pipeline.Item{Label: "s", Kind: "duckdb", Config: jsonx.Normalize(map[string]any{"kind": "duckdb", "timeout": 1,
		"query": "SELECT count(*) FROM range(1000000000000) a"}).(map[string]any), Input: map[string]any{}})
	if slow.Status != toolresult.StatusTimeout {
		t.Fatalf("a statement past its timeout: %s %+v", slow.Status, slow.Error)
	}
	same(t, "after a cancel", ok(t, run(t, r, "7", map[string]any{"kind": "duckdb", "query": "SELECT count(*) AS n FROM n"}))["rows"],
		[]any{map[string]any{"n": 2510}})

	// The workers of one engine (noetl dev's) share one helper, so an
	// execution's file is opened once.
	e := duckdb.New()
	if e.AsUser(u, dataDir, nil) != e.AsUser(u, dataDir, nil) {
		t.Fatal("two registries over one engine got helpers of their own")
	}
}

// TestDuckDBDataDirLink (security review): a data dir someone made a link
// first (its default is under /tmp) is refused, and the link's target is
// not given to the tool user.
func TestDuckDBDataDirLink(t *testing.T) {
	u := nobody(t)
	target := openDir(t, "noetl-root-dir-")
	link := filepath.Join(openDir(t, "noetl-data-"), "data")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	r := tools.New(tools.Options{DuckDB: duckdb.New(), DataDir: link, User: u})
	failed(t, run(t, r, "1", map[string]any{"kind": "duckdb", "query": "SELECT 1"}), "is a symbolic link, not a directory", "--data-dir")
	if got := owner(t, target); got != 0 {
		t.Fatalf("the link's target was given to uid %d", got)
	}
}
