package devstack

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// requireServerBinaries skips only where tests are told to use another server and the
// binaries to start our own are missing; otherwise a missing binary is a failure.
func requireServerBinaries(t *testing.T) {
	t.Helper()
	if _, err := findBinDir(""); err != nil {
		if os.Getenv("DATABASE_URL") != "" {
			t.Skipf("DATABASE_URL is set and %v", err)
		}
		t.Fatal(err)
	}
}

// testBaseDir is a base dir the postgres OS user can traverse (t.TempDir is 0700 root).
func testBaseDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "devstack-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func queryString(t *testing.T, dsn, sql string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	defer conn.Close(ctx)
	var s string
	if err := conn.QueryRow(ctx, sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

func databaseExists(t *testing.T, adminDSN, name string) bool {
	t.Helper()
	n := queryString(t, adminDSN, fmt.Sprintf("SELECT count(*)::text FROM pg_database WHERE datname = '%s'", name))
	return n == "1"
}

func dbName(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Database
}

func waitProcessGone(t *testing.T, pid int, limit time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func TestStartPostgresShards(t *testing.T) {
	requireServerBinaries(t)
	base := testBaseDir(t)
	begin := time.Now()
	pg, err := StartPostgres(context.Background(), PostgresOptions{Shards: 2, BaseDir: base})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	t.Logf("postgres: initdb+start %s, with 3 databases %s", pg.Server().StartDuration().Round(time.Millisecond), time.Since(begin).Round(time.Millisecond))

	if len(pg.ShardDSNs) != 2 {
		t.Fatalf("ShardDSNs = %v, want 2", pg.ShardDSNs)
	}
	seen := map[string]bool{}
	for _, dsn := range append([]string{pg.ClusterDSN}, pg.ShardDSNs...) {
		name := queryString(t, dsn, "SELECT current_database()")
		if seen[name] {
			t.Fatalf("database %s appears twice", name)
		}
		seen[name] = true
		if cfg, err := pgx.ParseConfig(dsn); err != nil || cfg.Host != "127.0.0.1" || cfg.User != "postgres" {
			t.Errorf("DSN %s is not postgres on 127.0.0.1 (%v)", dsn, err)
		}
	}
	// The test defaults are in force and reported.
	for _, name := range []string{"fsync", "synchronous_commit", "full_page_writes"} {
		if got := queryString(t, pg.ClusterDSN, "SHOW "+name); got != "off" {
			t.Errorf("%s = %s, want off", name, got)
		}
	}
	settings := map[string]string{}
	for _, s := range pg.Settings() {
		settings[s.Name] = s.Value
	}
	if settings["fsync"] != "off" || settings["max_connections"] != "200" {
		t.Errorf("Settings() = %v", pg.Settings())
	}
	// A unix socket is served from the temp dir too.
	sock := filepath.Join(pg.Server().Dir(), "sock")
	cfg, err := pgx.ParseConfig(pg.ClusterDSN)
	if err != nil {
		t.Fatal(err)
	}
	if got := queryString(t, fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres", sock, cfg.Port), "SELECT 'ok'"); got != "ok" {
		t.Errorf("socket query = %s", got)
	}

	pid, dir := pg.Server().PID(), pg.Server().Dir()
	if err := pg.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if alive(pid) {
		t.Errorf("postmaster %d still running after Stop", pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("temp dir %s still there after Stop (%v)", dir, err)
	}
	if err := pg.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// TestPasswordOnTCP: the server trusts no one on 127.0.0.1, where every
// local process (a step running as nobody too) connects: the DSNs devstack
// hands out carry a password of this cluster's own, and without it, or with
// another cluster's, the server refuses. The socket, which stays trust, is in
// a directory only the server's user may enter.
func TestPasswordOnTCP(t *testing.T) {
	requireServerBinaries(t)
	base := testBaseDir(t)
	start := func() *Postgres {
		pg, err := StartPostgres(context.Background(), PostgresOptions{Shards: 1, BaseDir: base})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = pg.Stop() })
		return pg
	}
	pg, other := start(), start() // the second is copied from the first's template
	refused := func(what, dsn string) {
		t.Helper()
		conn, err := pgx.Connect(context.Background(), dsn)
		if err == nil {
			_ = conn.Close(context.Background())
			t.Fatalf("%s: connected, want the password refused", what)
		}
		if !strings.Contains(err.Error(), "password authentication failed") {
			t.Fatalf("%s: %v, want password authentication failed", what, err)
		}
	}
	withPassword := func(dsn, pw string) string {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		if pw == "" {
			u.User = url.User(u.User.Username())
		} else {
			u.User = url.UserPassword(u.User.Username(), pw)
		}
		return u.String()
	}
	otherPW, _ := mustURL(t, other.ClusterDSN).User.Password()
	for _, dsn := range append([]string{pg.Server().AdminDSN(), pg.ClusterDSN}, pg.ShardDSNs...) {
		pw, ok := mustURL(t, dsn).User.Password()
		if !ok || len(pw) < 32 {
			t.Fatalf("DSN %s carries no password", dsn)
		}
		if pw == otherPW {
			t.Fatal("two clusters from one template share a password")
		}
		if got := queryString(t, dsn, "SELECT 'ok'"); got != "ok" {
			t.Fatalf("with the DSN: %s", got)
		}
		refused("no password", withPassword(dsn, ""))
		refused("a wrong password", withPassword(dsn, "postgres"))
		refused("another cluster's password", withPassword(dsn, otherPW))
	}
	// SCRAM only: a password sent in the clear (pgx falls back to it when
	// the server asks) is never asked for on TCP.
	if got := queryString(t, pg.ClusterDSN, "SELECT count(*)::text FROM pg_hba_file_rules WHERE type LIKE 'host%' AND auth_method <> 'scram-sha-256'"); got != "0" {
		t.Errorf("%s host rules of pg_hba.conf are not scram-sha-256", got)
	}
	sock := filepath.Join(pg.Server().Dir(), "sock")
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := serverCredential("")
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o700 || st.Uid != ownerUID(cred) {
		t.Errorf("socket dir %s: mode %v uid %d, want 0700 and the server's user %d", sock, fi.Mode().Perm(), st.Uid, ownerUID(cred))
	}
	// initdb's password file is gone.
	left, _ := filepath.Glob(filepath.Join(base, "*", "initdb.pw"))
	if len(left) != 0 {
		t.Errorf("initdb's password file is left: %v", left)
	}
}

func mustURL(t *testing.T, dsn string) *url.URL {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		t.Fatalf("DSN %s: not a URL with a user (%v)", dsn, err)
	}
	return u
}

func TestStartPostgresSingleDatabase(t *testing.T) {
	requireServerBinaries(t)
	pg, err := StartPostgres(context.Background(), PostgresOptions{BaseDir: testBaseDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop()
	if len(pg.ShardDSNs) != 1 || pg.ShardDSNs[0] != pg.ClusterDSN {
		t.Fatalf("single-database mode: ClusterDSN %s, ShardDSNs %v", pg.ClusterDSN, pg.ShardDSNs)
	}
}

func TestPostgresStopsOnContextCancel(t *testing.T) {
	requireServerBinaries(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pg, err := StartPostgres(ctx, PostgresOptions{Shards: 1, BaseDir: testBaseDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	pid, dir := pg.Server().PID(), pg.Server().Dir()
	cancel()
	if !waitProcessGone(t, pid, 30*time.Second) {
		_ = pg.Stop()
		t.Fatalf("postmaster %d still running 30 s after cancel", pid)
	}
	// Stop runs in the context's AfterFunc; calling it again waits for that one.
	if err := pg.Stop(); err != nil {
		t.Errorf("Stop after cancel: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("temp dir %s still there (%v)", dir, err)
	}
}

// TestExternalServer exercises the DATABASE_URL path against a server of our own, and
// the durability switches a benchmark uses.
func TestExternalServer(t *testing.T) {
	requireServerBinaries(t)
	srv, err := StartPostgresServer(context.Background(), PostgresOptions{
		BaseDir: testBaseDir(t), Fsync: true, SynchronousCommit: true, FullPageWrites: true,
		ExtraSettings: map[string]string{"work_mem": "8MB", "max_connections": "50"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	for name, want := range map[string]string{"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on", "work_mem": "8MB", "max_connections": "50"} {
		if got := queryString(t, srv.AdminDSN(), "SHOW "+name); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}

	pg, err := StartPostgres(context.Background(), PostgresOptions{AdminURL: srv.AdminDSN(), Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !pg.Server().External() || pg.Settings() != nil {
		t.Errorf("external server: External %v, Settings %v", pg.Server().External(), pg.Settings())
	}
	names := []string{dbName(t, pg.ClusterDSN), dbName(t, pg.ShardDSNs[0]), dbName(t, pg.ShardDSNs[1])}
	for _, name := range names {
		if !strings.HasPrefix(name, "noetl_t") || !databaseExists(t, srv.AdminDSN(), name) {
			t.Fatalf("database %s not created", name)
		}
	}
	// A session left open must not block the drop.
	conn, err := pgx.Connect(context.Background(), pg.ShardDSNs[1])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := pg.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	for _, name := range names {
		if databaseExists(t, srv.AdminDSN(), name) {
			t.Errorf("database %s not dropped by Stop", name)
		}
	}
	if got := queryString(t, srv.AdminDSN(), "SELECT 'up'"); got != "up" {
		t.Errorf("external server affected by Stop")
	}
}

func TestWithDatabase(t *testing.T) {
	cases := map[string]string{
		"postgres://u:p@h:5432/postgres?sslmode=disable": "postgres://u:p@h:5432/x?sslmode=disable",
		"postgresql://h/db":             "postgresql://h/x",
		"host=h user=u dbname=postgres": "host=h user=u dbname=postgres dbname=x",
	}
	for in, want := range cases {
		got, err := withDatabase(in, "x")
		if err != nil || got != want {
			t.Errorf("withDatabase(%q) = %q, %v; want %q", in, got, err, want)
		}
		if cfg, err := pgx.ParseConfig(got); err != nil || cfg.Database != "x" {
			t.Errorf("pgx reads %q as database %v (%v)", got, cfg, err)
		}
	}
}

func TestReapStale(t *testing.T) {
	base := testBaseDir(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadPID := dead.Process.Pid
	mk := func(name string, owner int) string {
		dir := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(owner)), 0o644); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-time.Minute)
		if err := os.Chtimes(dir, old, old); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	abandoned := mk(pgDirPrefix+"abandoned", deadPID)
	abandonedNATS := mk(natsDirPrefix+"abandoned", deadPID)
	// A template whose initdb was killed is reaped; a made one (renamed into
	// place with its maker's owner file) is kept after its maker ends.
	abandonedInitdb := mk(initdbTmpPrefix+"abandoned", deadPID)
	template := mk(initdbPrefix+"0123456789abcdef", deadPID)
	live := mk(pgDirPrefix+"live", os.Getpid())
	foreign := filepath.Join(base, pgDirPrefix+"foreign") // no owner marker: not ours
	if err := os.Mkdir(foreign, 0o755); err != nil {
		t.Fatal(err)
	}
	reapStale(base, nil2discard())
	for dir, wantGone := range map[string]bool{abandoned: true, abandonedNATS: true, abandonedInitdb: true, template: false,
		live: false, foreign: false} {
		_, err := os.Stat(dir)
		if gone := os.IsNotExist(err); gone != wantGone {
			t.Errorf("%s: gone = %v, want %v", filepath.Base(dir), gone, wantGone)
		}
	}
}

// TestKilledOwnerLeavesNoServer kills (SIGKILL) a process that started a server: the
// parent-death signal must stop the postmaster, and the next start removes the dir.
func TestKilledOwnerLeavesNoServer(t *testing.T) {
	if os.Getenv("DEVSTACK_TEST_HELPER") == "owner" {
		runOwnerHelper()
		return
	}
	requireServerBinaries(t)
	base := testBaseDir(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledOwnerLeavesNoServer$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DEVSTACK_TEST_HELPER=owner", "DEVSTACK_TEST_BASE="+base)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	var dir string
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if _, err := fmt.Sscanf(lines.Text(), "READY %d %s", &pid, &dir); err == nil {
			break
		}
	}
	if pid == 0 {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("helper did not report a started server")
	}
	_ = cmd.Process.Kill() // SIGKILL: no deferred cleanup runs in the helper
	_ = cmd.Wait()
	if !waitProcessGone(t, pid, 30*time.Second) {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		t.Fatalf("postmaster %d outlived its killed owner by 30 s", pid)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("expected the killed owner's dir to remain for reaping: %v", err)
	}
	old := time.Now().Add(-time.Minute)
	_ = os.Chtimes(dir, old, old)
	reapStale(base, nil2discard())
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("abandoned dir %s not reaped (%v)", dir, err)
	}
}

func runOwnerHelper() {
	pg, err := StartPostgres(context.Background(), PostgresOptions{BaseDir: os.Getenv("DEVSTACK_TEST_BASE")})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Printf("READY %d %s\n", pg.Server().PID(), pg.Server().Dir())
	time.Sleep(5 * time.Minute) // until killed
	_ = pg.Stop()
	os.Exit(1)
}
