package devstack

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// templates lists the initdb templates and their temp dirs in base.
func templates(t *testing.T, base string) (made, tmp []string) {
	t.Helper()
	all, err := filepath.Glob(filepath.Join(base, initdbPrefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range all {
		if strings.HasPrefix(filepath.Base(d), initdbTmpPrefix) {
			tmp = append(tmp, d)
		} else {
			made = append(made, d)
		}
	}
	return made, tmp
}

// TestClustersStartFromOneInitdb: the first start in a base dir makes the
// template (one initdb), later ones copy it; each cluster is its own (a
// table made in one is not in the other) and serves queries.
func TestClustersStartFromOneInitdb(t *testing.T) {
	requireServerBinaries(t)
	base := testBaseDir(t)
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
	start := func() *Postgres {
		pg, err := StartPostgres(context.Background(), PostgresOptions{BaseDir: base, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = pg.Stop() })
		return pg
	}
	first := start()
	made, tmp := templates(t, base)
	if len(made) != 1 || len(tmp) != 0 {
		t.Fatalf("after the first start: templates %v, temp dirs %v; want one template", made, tmp)
	}
	version := filepath.Join(made[0], "data", "PG_VERSION")
	before, err := os.Stat(version)
	if err != nil {
		t.Fatal(err)
	}
	second := start()
	again, _ := templates(t, base)
	after, err := os.Stat(version)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 1 || again[0] != made[0] || !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("the second start made a template again: %v (PG_VERSION %s, then %s)", again, before.ModTime(), after.ModTime())
	}
	if n := strings.Count(logged.String(), "msg=\"devstack: initdb\""); n != 1 {
		t.Fatalf("two starts ran initdb %d times, want once:\n%s", n, logged.String())
	}
	if first.Server().Dir() == second.Server().Dir() {
		t.Fatal("two starts share a data directory")
	}
	conn, err := pgx.Connect(context.Background(), first.ClusterDSN)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(context.Background(), "CREATE TABLE only_here (x int)")
	_ = conn.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := queryString(t, second.ClusterDSN, "SELECT count(*)::text FROM pg_class WHERE relname = 'only_here'"); got != "0" {
		t.Fatalf("a table made in one cluster is in the other: %s", got)
	}
	// The template outlives its clusters: Stop removes only the cluster's dir.
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	if made, _ := templates(t, base); len(made) != 1 {
		t.Fatalf("templates after Stop: %v", made)
	}
}

// TestPlantedTemplateIsNotUsed: a directory under the template's name that
// others can write, or that another user made (either could have been
// planted in /tmp), is not copied; the cluster runs initdb of its own and
// starts.
func TestPlantedTemplateIsNotUsed(t *testing.T) {
	requireServerBinaries(t)
	binDir, err := findBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	cred, err := serverCredential("")
	if err != nil {
		t.Fatal(err)
	}
	key, err := templateKey(binDir, cred)
	if err != nil {
		t.Fatal(err)
	}
	// plant makes a template-shaped directory owned by uid with the top
	// directory's mode, then starts a cluster beside it.
	plant := func(t *testing.T, uid int, mode os.FileMode) {
		base := testBaseDir(t)
		planted := filepath.Join(base, initdbPrefix+key)
		marker := filepath.Join(planted, "data", "PG_VERSION")
		if err := os.MkdirAll(filepath.Dir(marker), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(marker, []byte("planted\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{planted, filepath.Dir(marker), marker} {
			if err := os.Lchown(p, uid, -1); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(planted, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		pg, err := StartPostgres(ctx, PostgresOptions{BaseDir: base})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = pg.Stop() })
		if got := queryString(t, pg.ClusterDSN, "SELECT 'ok'"); got != "ok" {
			t.Fatal(got)
		}
		b, err := os.ReadFile(filepath.Join(pg.Server().Dir(), "data", "PG_VERSION"))
		if err != nil || string(b) == "planted\n" {
			t.Fatalf("the cluster's PG_VERSION is %q (%v): the planted template was copied", b, err)
		}
	}
	t.Run("writable by others", func(t *testing.T) {
		plant(t, int(ownerUID(cred)), 0o777)
	})
	t.Run("another user's", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("only root can make a directory another user owns")
		}
		plant(t, 0, 0o700) // root's, while the server runs as postgres
	})
}
