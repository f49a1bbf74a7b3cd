package devstack

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultPostgresBinDir is where Debian's postgresql-15 package puts the server binaries.
const DefaultPostgresBinDir = "/usr/lib/postgresql/15/bin"

// PostgresOptions configures a throwaway Postgres. The zero value is the test setup:
// single-database mode, durability off, binaries from $NOETL_PG_BIN or Debian's path.
type PostgresOptions struct {
	// Shards is the number of shard databases. 0 is single-database mode: ShardDSNs
	// is []string{ClusterDSN}, the cluster and shard 0 being one database.
	Shards int
	// AdminURL, when set, names an existing server (URL or keyword/value DSN of a role
	// allowed to CREATE DATABASE). Databases are created there and dropped by Stop; no
	// server is started and the settings below are ignored.
	AdminURL string
	// BinDir holds initdb and postgres. Default: $NOETL_PG_BIN, else
	// DefaultPostgresBinDir when it exists, else the directory of initdb on PATH.
	BinDir string
	// BaseDir is where the temp dir is created (default os.TempDir()). When running as
	// root, OSUser must be able to traverse it.
	BaseDir string
	// OSUser runs initdb and postgres when this process is root (default "postgres").
	OSUser string
	// Durability settings; false (off) is the test default. Benchmarks that publish
	// numbers turn them on and print Settings.
	Fsync             bool
	SynchronousCommit bool
	FullPageWrites    bool
	// MaxConnections is max_connections (default 200: parallel test packages each
	// open several pools).
	MaxConnections int
	// ExtraSettings are passed as `-c name=value` after the settings above (they win).
	ExtraSettings map[string]string
	// StartTimeout bounds initdb plus server start (default 60 s).
	StartTimeout time.Duration
	// Logger receives progress lines; nil discards them.
	Logger *slog.Logger
}

// Setting is one server configuration parameter as passed to postgres.
type Setting struct {
	Name  string
	Value string
}

// PostgresServer is a Postgres server devstack can create databases in: one it
// started, or an external one reached through PostgresOptions.AdminURL.
type PostgresServer struct {
	adminDSN  string // maintenance database of the server
	external  bool
	settings  []Setting
	dir       string // temp dir (data, socket, log); "" when external
	logPath   string
	cmd       *exec.Cmd
	exited    chan struct{} // closed once the postmaster has exited
	startTook time.Duration
	log       *slog.Logger
	// What a restart needs (Halt, Resume): the same binaries, data, socket
	// dir, port and user.
	binDir, dataDir, sockDir string
	port                     int
	cred                     *syscall.Credential
	mu                       sync.Mutex // guards cmd and exited across restarts

	stopOnce  sync.Once
	stopErr   error
	stopAfter func() bool // unregisters the context watcher
}

// Postgres is a set of databases (cluster + shards) on a PostgresServer.
type Postgres struct {
	// ClusterDSN is the cluster database.
	ClusterDSN string
	// ShardDSNs are the shard databases in shard-index order.
	ShardDSNs []string

	server     *PostgresServer
	ownsServer bool
	dbNames    []string

	stopOnce  sync.Once
	stopErr   error
	stopAfter func() bool
}

// StartPostgres starts a server (or connects to opts.AdminURL) and creates a cluster
// database and opts.Shards shard databases. ctx bounds the life of everything started,
// not just the start: when it is cancelled, Stop runs.
func StartPostgres(ctx context.Context, opts PostgresOptions) (*Postgres, error) {
	srv, err := StartPostgresServer(ctx, opts)
	if err != nil {
		return nil, err
	}
	p, err := srv.CreateDatabases(ctx, opts.Shards)
	if err != nil {
		return nil, errors.Join(err, srv.Stop())
	}
	p.ownsServer = true
	p.stopAfter = context.AfterFunc(ctx, func() { _ = p.Stop() })
	return p, nil
}

// Server is the server the databases live on.
func (p *Postgres) Server() *PostgresServer { return p.server }

// Settings are the server settings devstack passed (nil for an external server).
func (p *Postgres) Settings() []Setting { return p.server.Settings() }

// Stop drops the databases (or, when StartPostgres started the server, stops the
// server and removes its temp dir). Safe to call more than once and concurrently.
func (p *Postgres) Stop() error {
	p.stopOnce.Do(func() {
		if p.stopAfter != nil {
			p.stopAfter()
		}
		if p.ownsServer && !p.server.external {
			p.stopErr = p.server.Stop() // the databases go with the data dir
			return
		}
		p.stopErr = p.server.dropDatabases(p.dbNames)
		if p.ownsServer {
			p.stopErr = errors.Join(p.stopErr, p.server.Stop())
		}
	})
	return p.stopErr
}

// StartPostgresServer starts a server without creating databases (or, with
// opts.AdminURL, checks that the external server answers). ctx bounds its life.
func StartPostgresServer(ctx context.Context, opts PostgresOptions) (*PostgresServer, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Shards < 0 || opts.Shards > 1024 {
		return nil, fmt.Errorf("devstack: shards %d outside 0..1024", opts.Shards)
	}
	s := &PostgresServer{log: log, exited: make(chan struct{})}
	begin := time.Now()
	if opts.AdminURL != "" {
		s.external = true
		s.adminDSN = opts.AdminURL
		close(s.exited)
		if err := ping(ctx, s.adminDSN); err != nil {
			return nil, fmt.Errorf("devstack: external postgres: %w", err)
		}
	} else if err := s.startLocal(ctx, opts); err != nil {
		return nil, err
	}
	s.startTook = time.Since(begin)
	s.stopAfter = context.AfterFunc(ctx, func() { _ = s.Stop() })
	return s, nil
}

// AdminDSN connects to the server's maintenance database as a superuser (or the
// AdminURL role).
func (s *PostgresServer) AdminDSN() string { return s.adminDSN }

// External reports whether the server was given (AdminURL) rather than started.
func (s *PostgresServer) External() bool { return s.external }

// Settings returns the settings devstack started the server with, in the order
// passed; nil for an external server.
func (s *PostgresServer) Settings() []Setting { return append([]Setting(nil), s.settings...) }

// StartDuration is how long initdb plus server start (or the external ping) took.
func (s *PostgresServer) StartDuration() time.Duration { return s.startTook }

// PID is the postmaster's process id (0 for an external server).
func (s *PostgresServer) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Dir is the temp dir holding the data dir, socket dir and log ("" when external).
func (s *PostgresServer) Dir() string { return s.dir }

// CreateDatabases creates a uniquely named cluster database and shards shard
// databases (0: single-database mode). The returned Postgres's Stop drops them.
func (s *PostgresServer) CreateDatabases(ctx context.Context, shards int) (*Postgres, error) {
	if shards < 0 || shards > 1024 {
		return nil, fmt.Errorf("devstack: shards %d outside 0..1024", shards)
	}
	prefix, err := uniquePrefix()
	if err != nil {
		return nil, err
	}
	names := []string{prefix + "_cluster"}
	for i := 0; i < shards; i++ {
		names = append(names, fmt.Sprintf("%s_shard%d", prefix, i))
	}
	conn, err := pgx.Connect(ctx, s.adminDSN)
	if err != nil {
		return nil, fmt.Errorf("devstack: connect to create databases: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// Every CREATE DATABASE clones a template (template1 here). From Postgres 15 on,
	// FILE_COPY copies the files instead of WAL-logging every block: faster for the
	// near-empty template.
	var version int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		return nil, fmt.Errorf("devstack: server version: %w", err)
	}
	clause := " TEMPLATE template1"
	if version >= 150000 {
		clause += " STRATEGY FILE_COPY"
	}
	p := &Postgres{server: s}
	for _, name := range names {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+clause); err != nil {
			return nil, errors.Join(fmt.Errorf("devstack: create database %s: %w", name, err), s.dropDatabases(p.dbNames))
		}
		p.dbNames = append(p.dbNames, name)
	}
	dsns := make([]string, len(names))
	for i, name := range names {
		if dsns[i], err = withDatabase(s.adminDSN, name); err != nil {
			return nil, errors.Join(err, s.dropDatabases(p.dbNames))
		}
	}
	p.ClusterDSN = dsns[0]
	if shards == 0 {
		p.ShardDSNs = []string{dsns[0]}
	} else {
		p.ShardDSNs = dsns[1:]
	}
	s.log.Debug("devstack: databases created", "cluster", names[0], "shards", shards)
	return p, nil
}

func (s *PostgresServer) dropDatabases(names []string) error {
	if len(names) == 0 {
		return nil
	}
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	select {
	case <-exited:
		if !s.external {
			return nil // the server is gone and its data dir with it
		}
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.adminDSN)
	if err != nil {
		return fmt.Errorf("devstack: connect to drop databases: %w", err)
	}
	defer conn.Close(ctx)
	var errs []error
	for _, name := range names {
		// FORCE (Postgres 13+) ends sessions a test forgot to close.
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			errs = append(errs, fmt.Errorf("devstack: drop database %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Stop stops a server devstack started and removes its temp dir; for an external
// server it does nothing. Idempotent.
func (s *PostgresServer) Stop() error {
	s.stopOnce.Do(func() {
		if s.stopAfter != nil {
			s.stopAfter()
		}
		if s.external {
			return
		}
		err := s.stopProcess()
		if rmErr := os.RemoveAll(s.dir); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("devstack: remove %s: %w", s.dir, rmErr))
		}
		s.stopErr = err
		s.log.Debug("devstack: postgres stopped", "dir", s.dir)
	})
	return s.stopErr
}

// Halt stops a server devstack started, keeping its data, port and temp dir
// for Resume: mode is pg_ctl's shutdown mode, "fast" (sessions are ended,
// the server checkpoints and exits) or "immediate" (every process quits at
// once, as in a crash: the next start recovers from the WAL). Tests of a
// database outage stop it for as long as they like.
func (s *PostgresServer) Halt(mode string) error {
	if s.external {
		return errors.New("devstack: an external server cannot be halted")
	}
	if mode != "fast" && mode != "immediate" {
		return fmt.Errorf("devstack: shutdown mode %q: use fast or immediate", mode)
	}
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	stop := exec.Command(filepath.Join(s.binDir, "pg_ctl"), "stop", "-D", s.dataDir, "-m", mode, "-w", "-t", "60")
	stop.Dir = s.dir
	stop.SysProcAttr = procAttr(s.cred)
	if out, err := stop.CombinedOutput(); err != nil {
		return fmt.Errorf("devstack: pg_ctl stop -m %s: %w\n%s", mode, err, out)
	}
	<-exited
	s.log.Debug("devstack: postgres halted", "mode", mode)
	return nil
}

// Resume starts a halted server again on the same port and data: what
// `pg_ctl restart` does, in two steps, with the server still this
// process's child (so Stop and the parent-death signal still work).
func (s *PostgresServer) Resume(ctx context.Context) error {
	if s.external {
		return errors.New("devstack: an external server cannot be resumed")
	}
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	select {
	case <-exited:
	default:
		return errors.New("devstack: the server is running; Halt it first")
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := s.runServer(ctx, true); err != nil {
		return fmt.Errorf("devstack: resume: %w", err)
	}
	s.log.Debug("devstack: postgres resumed", "port", s.port)
	return nil
}

func (s *PostgresServer) stopProcess() error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	pid := cmd.Process.Pid
	select {
	case <-exited:
	default:
		_ = syscall.Kill(pid, syscall.SIGINT) // fast shutdown: end sessions, checkpoint, exit
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			<-exited
		}
	}
	// Backends are children of the postmaster in its group; none should outlive it,
	// but make sure (ESRCH when the group is already empty).
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("devstack: kill postgres process group %d: %w", pid, err)
	}
	return nil
}

func (s *PostgresServer) startLocal(ctx context.Context, opts PostgresOptions) error {
	binDir, err := findBinDir(opts.BinDir)
	if err != nil {
		return err
	}
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	base := opts.BaseDir
	if base == "" {
		base = os.TempDir()
	}
	reapStale(base, s.log)
	cred, err := serverCredential(opts.OSUser)
	if err != nil {
		return err
	}
	dir, err := makeOwnedDir(base, pgDirPrefix, cred)
	if err != nil {
		return err
	}
	s.dir = dir
	fail := func(err error) error {
		_ = s.stopProcess()
		return errors.Join(err, os.RemoveAll(dir))
	}
	dataDir := filepath.Join(dir, "data")
	sockDir := filepath.Join(dir, "sock")
	if err := os.Mkdir(sockDir, 0o700); err != nil {
		return fail(fmt.Errorf("devstack: %w", err))
	}
	if err := chown(sockDir, cred); err != nil {
		return fail(err)
	}

	if err := initDataDir(ctx, binDir, base, dataDir, cred, s.log); err != nil {
		return fail(err)
	}

	s.settings = settingsFor(opts)
	// A free port can be taken between our probe and the server's bind: retry then.
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return fail(err)
		}
		s.binDir, s.dataDir, s.sockDir, s.port, s.cred = binDir, dataDir, sockDir, port, cred
		err = s.runServer(ctx, false)
		if err == nil {
			if err := s.setPassword(ctx); err != nil {
				return fail(err)
			}
			s.log.Debug("devstack: postgres ready", "port", port, "dir", dir)
			return nil
		}
		if !errors.Is(err, errPortTaken) || attempt == 3 {
			return fail(err)
		}
	}
}

// setPassword gives the superuser a password of this cluster's own (the
// template's is shared by every cluster copied from it, and unknown) over the
// socket, and makes adminDSN carry it: every DSN devstack hands out is made
// from adminDSN.
func (s *PostgresServer) setPassword(ctx context.Context) error {
	pw, err := randomPassword()
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, s.socketDSN())
	if err != nil {
		return fmt.Errorf("devstack: connect over the socket to set the password: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// The password goes as a literal: ALTER ROLE takes no parameters.
	if _, err := conn.Exec(ctx, "ALTER ROLE postgres PASSWORD "+quoteLiteral(pw)); err != nil {
		return fmt.Errorf("devstack: set the superuser's password: %w", err)
	}
	u := url.URL{Scheme: "postgres", User: url.UserPassword("postgres", pw),
		Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)), Path: "/postgres", RawQuery: "sslmode=disable"}
	s.adminDSN = u.String()
	if err := ping(ctx, s.adminDSN); err != nil {
		return fmt.Errorf("devstack: postgres over TCP with its password: %w", err)
	}
	return nil
}

// socketDSN reaches the server as its superuser over the unix socket in the
// private socket dir, where trust applies.
func (s *PostgresServer) socketDSN() string {
	q := url.Values{"host": {s.sockDir}, "port": {strconv.Itoa(s.port)}, "connect_timeout": {"2"}}
	return "postgres://postgres@/postgres?" + q.Encode()
}

// randomPassword is 32 hex digits from crypto/rand: no character a URL or a
// conninfo string must escape.
func randomPassword() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("devstack: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

var errPortTaken = errors.New("port taken")

// runServer starts postgres and waits until it answers; resumed appends to
// the log of the earlier run rather than starting it again.
func (s *PostgresServer) runServer(ctx context.Context, resumed bool) error {
	binDir, dataDir, sockDir, port, cred := s.binDir, s.dataDir, s.sockDir, s.port, s.cred
	args := []string{"-D", dataDir, "-p", strconv.Itoa(port), "-k", sockDir,
		"-c", "listen_addresses=127.0.0.1"}
	for _, st := range s.settings {
		args = append(args, "-c", st.Name+"="+st.Value)
	}
	s.logPath = filepath.Join(s.dir, "postgres.log")
	mode := os.O_TRUNC
	if resumed {
		mode = os.O_APPEND
	}
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|mode, 0o644)
	if err != nil {
		return fmt.Errorf("devstack: %w", err)
	}
	defer logFile.Close() // the child keeps its own descriptor
	// Not CommandContext: the server outlives the start context; Stop ends it.
	cmd := exec.Command(filepath.Join(binDir, "postgres"), args...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = procAttr(cred)
	cmd.SysProcAttr.Pdeathsig = syscall.SIGINT // owner killed: fast shutdown
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("devstack: start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()

	// Ready once the socket answers: TCP needs the password, which a new
	// cluster sets only after this. A TCP port taken makes postgres exit.
	dsn := s.socketDSN()
	for {
		select {
		case <-exited:
			logText, _ := os.ReadFile(s.logPath)
			if bytes.Contains(logText, []byte("could not bind")) || bytes.Contains(logText, []byte("could not create any TCP/IP sockets")) {
				return errPortTaken
			}
			return fmt.Errorf("devstack: postgres exited during start:\n%s", tail(logText, 2000))
		case <-ctx.Done():
			logText, _ := os.ReadFile(s.logPath)
			return fmt.Errorf("devstack: postgres not ready: %w\n%s", ctx.Err(), tail(logText, 2000))
		default:
		}
		if ping(ctx, dsn) == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func settingsFor(opts PostgresOptions) []Setting {
	onOff := func(b bool) string {
		if b {
			return "on"
		}
		return "off"
	}
	maxConns := opts.MaxConnections
	if maxConns <= 0 {
		maxConns = 200
	}
	settings := []Setting{
		{"fsync", onOff(opts.Fsync)},
		{"synchronous_commit", onOff(opts.SynchronousCommit)},
		{"full_page_writes", onOff(opts.FullPageWrites)},
		{"max_connections", strconv.Itoa(maxConns)},
	}
	names := make([]string, 0, len(opts.ExtraSettings))
	for name := range opts.ExtraSettings {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		replaced := false
		for i := range settings {
			if settings[i].Name == name {
				settings[i].Value, replaced = opts.ExtraSettings[name], true
			}
		}
		if !replaced {
			settings = append(settings, Setting{name, opts.ExtraSettings[name]})
		}
	}
	return settings
}

func findBinDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("NOETL_PG_BIN")
	}
	if dir == "" {
		if _, err := os.Stat(filepath.Join(DefaultPostgresBinDir, "initdb")); err == nil {
			dir = DefaultPostgresBinDir
		} else if p, err := exec.LookPath("initdb"); err == nil {
			dir = filepath.Dir(p)
		} else {
			return "", errors.New("devstack: Postgres server binaries not found: install postgresql-15 (initdb, postgres), set NOETL_PG_BIN, or set DATABASE_URL to use a running server")
		}
	}
	for _, bin := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return "", fmt.Errorf("devstack: %s not found in %s: %w", bin, dir, err)
		}
	}
	return dir, nil
}

// serverCredential is the identity to run initdb/postgres under: nil (ourselves)
// unless we are root, which initdb refuses.
func serverCredential(osUser string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	if osUser == "" {
		osUser = "postgres"
	}
	u, err := user.Lookup(osUser)
	if err != nil {
		return nil, fmt.Errorf("devstack: running as root, so the server must run as another user: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("devstack: user %s: %w", osUser, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func procAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred}
}

func chown(path string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	if err := os.Chown(path, int(cred.Uid), int(cred.Gid)); err != nil {
		return fmt.Errorf("devstack: %w", err)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("devstack: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func ping(ctx context.Context, dsn string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// withDatabase returns dsn pointing at database db instead.
func withDatabase(dsn, db string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("devstack: parse database URL: %w", err)
		}
		u.Path = "/" + db
		u.RawPath = ""
		return u.String(), nil
	}
	// keyword/value form: a later dbname wins when pgx parses it.
	return dsn + " dbname=" + db, nil
}

func uniquePrefix() (string, error) {
	var b [5]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("devstack: %w", err)
	}
	return "noetl_t" + hex.EncodeToString(b[:]), nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
