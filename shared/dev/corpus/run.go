package corpus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/dev/devserver"
	"github.com/noetl-go/noetl/shared/tools"
	"github.com/noetl-go/noetl/shared/wire"
	"github.com/noetl-go/noetl/shared/worker"
)

// Options configure Start.
type Options struct {
	// Dir is the corpus folder: offline.json and playbooks/.
	Dir string
	// Python is the interpreter python steps run with (default python3).
	Python string
	// Workers and Concurrency: in-process workers and the commands each runs at once
	// (default 2 and worker.DefaultConcurrency, as noetl dev).
	Workers, Concurrency int
	// Timeout bounds one playbook's run unless its check says otherwise (default 3 min).
	Timeout time.Duration
	// Logger receives the stack's logs (default: discarded).
	Logger *slog.Logger
	// Full runs the stress playbooks at NoETL's sizes (see Check.Smaller).
	Full bool
	// ToolUser runs python and shell steps as that account (see worker.Standard).
	ToolUser string
	// Getenv configures the stack (tokens, lease, …); default os.Getenv, with the
	// database and NATS always throwaway.
	Getenv func(string) string
	// DuckDB is the workers' embedded DuckDB (noetl corpus plugs it in; the
	// tests of this package run without it, and its playbooks then fail).
	DuckDB tools.SQLEngine
}

// Stack is a running stack for the corpus: the control plane with its workers, a
// database the playbooks' credential aliases name, and the HTTP fixture.
type Stack struct {
	srv     *devserver.Server
	fixture *httptest.Server
	cl      *client.Client
	dir     string
	timeout time.Duration
	stop    context.CancelFunc
	wg      sync.WaitGroup
	full    bool
	byFile  map[string]string // playbook file → catalog path
	dsn     string            // CorpusDatabase
	tmp     string            // the workers' data dir (duckdb files), removed by Close
	mu      sync.Mutex
	ran     map[string]*Outcome // playbooks run as prerequisites or on their own
}

// CorpusDatabase is the database the credential aliases name, created in the
// stack's throwaway Postgres server beside its own databases.
const CorpusDatabase = "noetl_corpus"

// Aliases are the credential aliases of the corpus's postgres steps: each names
// CorpusDatabase. (The corpus's playbooks name their database through these, directly
// or through a workload value such as pg_auth.)
var Aliases = []string{"pg_local", "pg_k8s", "test_postgres", "noetl_connection", "pg_trade", "pg_auth", "postgres", "noetl"}

// NATSAlias is the credential alias of the corpus's nats steps: it names the
// stack's NATS.
const NATSAlias = "nats_credential"

// Start brings the stack up. Close takes it down and removes what it started.
func Start(ctx context.Context, o Options) (_ *Stack, err error) {
	if o.Workers <= 0 {
		o.Workers = 2
	}
	if o.Concurrency <= 0 {
		o.Concurrency = worker.DefaultConcurrency
	}
	if o.Timeout <= 0 {
		o.Timeout = 3 * time.Minute
	}
	if o.Python == "" {
		o.Python = "python3"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if _, err := os.Stat(filepath.Join(o.Dir, "offline.json")); err != nil {
		return nil, fmt.Errorf("corpus folder: %w", err)
	}
	srv, err := devserver.Start(ctx, devserver.Options{DrainEvery: devserver.DefaultDrainEvery, Logger: o.Logger,
		Getenv: func(k string) string {
			switch k {
			case "NOETL_DATABASE_URL", "NOETL_SHARD_URLS", "NOETL_NATS_URL", "NOETL_SERVER_URL", "NOETL_RESULT_STORE":
				return "" // always the throwaway parts
			}
			return getenv(k)
		}})
	if err != nil {
		return nil, fmt.Errorf("start the stack: %w", err)
	}
	s := &Stack{srv: srv, dir: o.Dir, timeout: o.Timeout, full: o.Full, byFile: map[string]string{}, ran: map[string]*Outcome{}}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	dsn, err := createDatabase(ctx, srv.ClusterDSN, CorpusDatabase)
	if err != nil {
		return nil, err
	}
	s.dsn = dsn
	if s.tmp, err = os.MkdirTemp("", "noetl-corpus-"); err != nil {
		return nil, err
	}
	s.fixture = httptest.NewServer(NewFixture())
	creds := tools.CredentialMap{}
	for _, a := range Aliases {
		creds[a] = tools.Credential{Kind: "postgres", DSN: dsn}
	}
	// test_nats_kv's alias names the stack's own NATS.
	creds[NATSAlias] = tools.Credential{Kind: "nats", DSN: srv.NATSURL}
	token, apiToken := getenv("NOETL_WORKER_TOKEN"), getenv("NOETL_API_TOKEN")
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stop = stop
	for i := range o.Workers {
		w, err := worker.Standard{Server: srv.URL, Token: token, APIToken: apiToken, JS: srv.JS, Pool: "shared",
			ID: fmt.Sprintf("corpus-worker-%d", i+1), Concurrency: o.Concurrency, Python: o.Python,
			Credentials: creds, Results: srv.Results, Logger: o.Logger, ToolUser: o.ToolUser, DuckDB: o.DuckDB,
			DataDir: s.tmp}.Build(ctx)
		if err != nil {
			return nil, err
		}
		s.wg.Add(1)
		go func() { defer s.wg.Done(); _ = w.Run(wctx) }()
	}
	s.cl = client.New(srv.URL, apiToken)
	return s, nil
}

// createDatabase creates db in the server of adminDSN and returns its DSN.
func createDatabase(ctx context.Context, adminDSN, db string) (string, error) {
	cfg, err := pgx.ParseConfig(adminDSN)
	if err != nil {
		return "", err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", fmt.Errorf("connect to create %s: %w", db, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", db, err)
	}
	cfg.Database = db
	return cfg.ConnString(), nil
}

// URL is the control plane's.
func (s *Stack) URL() string { return s.srv.URL }

// FixtureURL is the HTTP fixture's (the workload's api_url).
func (s *Stack) FixtureURL() string { return s.fixture.URL }

// Close stops the workers, the fixture and the stack.
func (s *Stack) Close() {
	if s.stop != nil {
		s.stop()
		s.wg.Wait()
	}
	if s.fixture != nil {
		s.fixture.Close()
	}
	if s.tmp != "" {
		_ = os.RemoveAll(s.tmp)
	}
	_ = s.srv.Close()
}

// RegisterAll registers every playbook file of the corpus (sub-playbooks are
// started by catalog path, so every file a playbook tool may name must be in the
// catalog). Files the validator refuses are skipped: the corpus test
// (shared/engine) accounts for each.
func (s *Stack) RegisterAll(ctx context.Context) error {
	root := filepath.Join(s.dir, "playbooks")
	return filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !strings.Contains(string(src), "kind: Playbook") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		r, err := s.cl.Register(ctx, string(src))
		if err != nil {
			if client.StatusOf(err) == 0 {
				return fmt.Errorf("register %s: %w", rel, err)
			}
			return nil // refused: not runnable
		}
		s.byFile[filepath.ToSlash(rel)] = r.Path
		return nil
	})
}

// Outcome is one playbook's run.
type Outcome struct {
	Entry
	ExecutionID int64
	// Status is the execution's final status, or what stopped the runner from
	// reading one (NOT REGISTERED, TIMEOUT, ERROR).
	Status string
	Error  string
	// Checked is what the playbook's own checks found ("" when they passed).
	Checked string
	// Pass: the run ended as expected and its checks passed.
	Pass     bool
	Duration time.Duration
	// Known is the documented reason a playbook of ours does not pass (see
	// docs/noetl-playbooks.md); empty for one expected to pass.
	Known string
	// View is the execution's final view (nil when none was read): its
	// summary, with the steps when the check reads them.
	View *wire.Execution
}

// Run runs one playbook and judges it by its check. The playbooks its check names
// in After run first (once per stack) and its Seed is applied.
func (s *Stack) Run(ctx context.Context, e Entry) (out Outcome) {
	s.mu.Lock()
	done := s.ran[e.File]
	s.mu.Unlock()
	if done != nil {
		out = *done   // already run, as another's prerequisite
		out.Entry = e // with its own class, not the one it was run under
		return out
	}
	start := time.Now()
	out = Outcome{Entry: e}
	c := checkFor(e.File)
	out.Known = c.Known
	defer func() {
		out.Duration = time.Since(start)
		s.mu.Lock()
		s.ran[e.File] = &out
		s.mu.Unlock()
	}()
	for _, dep := range c.After {
		s.mu.Lock()
		done := s.ran[dep]
		s.mu.Unlock()
		if done == nil {
			d := s.Run(ctx, Entry{File: dep, Class: ClassLocal})
			done = &d
		}
		if !done.Pass {
			out.Status, out.Error = "NOT RUN", fmt.Sprintf("%s, which this playbook needs first, did not pass", dep)
			return out
		}
	}
	if c.Seed != "" {
		if err := s.exec(ctx, c.Seed); err != nil {
			out.Status, out.Error = "ERROR", fmt.Sprintf("seed: %v", err)
			return out
		}
	}
	path, ok := s.byFile[e.File]
	if !ok {
		out.Status, out.Error = "NOT REGISTERED", "the playbook did not register (see noetl validate)"
		return out
	}
	host := strings.TrimPrefix(s.fixture.URL, "http://")
	pg, err := pgx.ParseConfig(s.dsn)
	if err != nil {
		out.Status, out.Error = "NOT RUN", fmt.Sprintf("the corpus database's DSN: %v", err)
		return out
	}
	password := pg.Password
	if password == "" {
		// A server that wants none (the throwaway one's DSN carries its own)
		// ignores it; the playbooks write password={pg_password} into a
		// conninfo, which an empty value would break.
		password = "noetl"
	}
	expand := strings.NewReplacer("$FIXTURE_HOST", host, "$FIXTURE_URL", s.fixture.URL, "$PLAYBOOKS", filepath.Join(s.dir, "playbooks"),
		"$PG_HOST", pg.Host, "$PG_PORT", strconv.Itoa(int(pg.Port)), "$PG_DATABASE", pg.Database, "$PG_USER", pg.User, "$PG_PASSWORD", password)
	payload := map[string]any{"api_url": s.fixture.URL}
	if !s.full {
		maps.Copy(payload, c.Smaller)
	}
	for k, v := range c.Payload {
		if str, isText := v.(string); isText {
			v = expand.Replace(str)
		}
		payload[k] = v
	}
	id, err := s.cl.Execute(ctx, wire.ExecuteRequest{Path: path, Payload: payload})
	if err != nil {
		out.Status, out.Error = "ERROR", err.Error()
		return out
	}
	out.ExecutionID = id
	timeout := s.timeout
	if c.Timeout > 0 {
		timeout = c.Timeout
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The summary (no steps, no events) has the status; the steps are read
	// only when a check needs them, so a run with huge step results (its
	// whole view over the client's answer limit) is still judged.
	view, err := s.cl.WaitSummary(wctx, id, 250*time.Millisecond)
	if err == nil && len(c.Expect) > 0 {
		view, err = s.cl.Execution(wctx, id)
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			out.Status, out.Error = "TIMEOUT", fmt.Sprintf("not finished after %s", timeout)
			_, _ = s.cl.Cancel(context.WithoutCancel(ctx), id, "corpus: timeout")
		} else {
			out.Status, out.Error = "ERROR", err.Error()
		}
		return out
	}
	out.View = view
	out.Status, out.Error = view.Status, string(view.Error)
	out.Checked = c.judge(view)
	out.Pass = out.Checked == ""
	return out
}

// exec runs SQL in CorpusDatabase.
func (s *Stack) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// Report writes one line per outcome and the summary.
func Report(w io.Writer, outs []Outcome) Summary {
	var sum Summary
	for _, o := range outs {
		verdict := "PASS"
		if !o.Pass {
			verdict = "FAIL"
		}
		checks := "checks passed"
		if o.Checked != "" {
			checks = "checks: " + o.Checked
		}
		fmt.Fprintf(w, "%-4s %-10s %-9s %-90s %6.1fs  %s\n", verdict, o.Class, o.Status, o.File, o.Duration.Seconds(), checks)
		if !o.Pass && o.Error != "" {
			fmt.Fprintf(w, "     error: %s\n", oneLine(o.Error, 300))
		}
		if !o.Pass && o.Known != "" {
			fmt.Fprintf(w, "     known: %s\n", o.Known)
		}
		sum.add(o)
	}
	fmt.Fprintln(w, sum)
	return sum
}

// Summary counts outcomes.
type Summary struct {
	Ours, OursPassed     int // local and local+http
	Needs, NeedsPassed   int // needs:<feature>
	Completed, Failed    int
	Regressions          []string // ours, not passing, not known
	KnownFailing, Others int
}

func (s *Summary) add(o Outcome) {
	switch o.Status {
	case "COMPLETED":
		s.Completed++
	case "FAILED":
		s.Failed++
	default:
		s.Others++
	}
	if !o.Ours() {
		s.Needs++
		if o.Pass {
			s.NeedsPassed++
		}
		return
	}
	s.Ours++
	if o.Pass {
		s.OursPassed++
		return
	}
	if o.Known != "" {
		s.KnownFailing++
	} else {
		s.Regressions = append(s.Regressions, o.File)
	}
}

func (s Summary) String() string {
	msg := fmt.Sprintf("corpus: local and local+http %d/%d pass; needs:… %d/%d pass; %d COMPLETED, %d FAILED, %d other",
		s.OursPassed, s.Ours, s.NeedsPassed, s.Needs, s.Completed, s.Failed, s.Others)
	if len(s.Regressions) > 0 {
		msg += fmt.Sprintf("\ncorpus: %d of ours fail without a documented reason: %s", len(s.Regressions), strings.Join(s.Regressions, ", "))
	}
	return msg
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
