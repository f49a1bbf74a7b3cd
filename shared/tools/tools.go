package tools

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/resultstore"
	"github.com/noetl-go/noetl/shared/tmpl"
	"github.com/noetl-go/noetl/shared/toolkind"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// Options configure a Registry. All fields are optional.
type Options struct {
	// Credentials resolves `auth:` (alias `credential:`) aliases (R-P4). Nil: every
	// alias is reported as not configured.
	Credentials Credentials
	// Children starts and waits child executions for the playbook tool. Nil: the
	// playbook tool fails with a clear error.
	Children Children
	// Python is the interpreter (default "python3", looked up on PATH).
	Python string
	// WorkDir is where per-run temp dirs for python side files go (default os.TempDir()).
	WorkDir string
	// Logger receives debug lines per tool run (default slog.Default()).
	Logger *slog.Logger
	// MaxOutput bounds each of stdout and stderr kept from a subprocess (default
	// DefaultMaxOutput); the rest is dropped with a note.
	MaxOutput int
	// User runs python and shell as that account (LookupUser); nil: as the
	// worker. Python must then name an interpreter the user can run (see
	// ResolvePython).
	User *User
	// NATS is the JetStream the nats tool uses when a step names no server
	// (the worker's own); nil: such steps fail saying so.
	NATS jetstream.JetStream
	// Results is the result store the artifact tool reads references from (the
	// worker's); nil: only file:// references outside any store are refused.
	Results resultstore.Store
	// DuckDB is the embedded DuckDB engine (shared/tools/duckdb, which needs cgo:
	// the worker binary plugs it in); nil: duckdb steps fail saying so. With
	// a User it runs as that user (SQLEngineAsUser).
	DuckDB SQLEngine
	// DataDir holds the duckdb tool's default database files, one per
	// execution (default <temp dir>/noetl-data).
	DataDir string
	// AllowLinkLocal lets the http, transfer and script-source tools reach
	// link-local and cloud metadata addresses (netguard.go; LinkLocalEnv);
	// false refuses them.
	AllowLinkLocal bool
}

// DefaultMaxOutput is the default bound on captured stdout and stderr, each.
const DefaultMaxOutput = 1 << 20

// Registry runs tools. It is safe for concurrent use; it holds no per-call state.
type Registry struct {
	creds     Credentials
	children  Children
	python    string
	workDir   string
	log       *slog.Logger
	maxOutput int
	// maxResult bounds a python step's result file (MaxPythonResult).
	maxResult int64
	user      *User
	nats      jetstream.JetStream
	results   resultstore.Store
	duckdb    SQLEngine
	dataDir   string
	// pidNS remembers whether python runs get a pid namespace of their
	// own (withOwnPIDs, Registry.ownPIDs).
	pidNS pidNSProbe
	// allowLinkLocal turns the address guard off (netguard.go).
	allowLinkLocal bool
	// claimsEnded are cursor claims' transactions seen ended (AwaitClaim).
	claimsEnded txidSet
	// pgIdle keeps postgres connections between steps.
	pgIdle pgIdle
	// Two shared transports so connections are pooled across calls; verify_ssl: false
	// picks the second.
	transport         *http.Transport
	insecureTransport *http.Transport
}

// Close closes what the registry keeps between steps (idle postgres
// connections); it keeps none after.
func (r *Registry) Close() {
	r.pgIdle.close()
}

// New builds a Registry.
func New(opts Options) *Registry {
	r := &Registry{
		creds:     opts.Credentials,
		children:  opts.Children,
		python:    opts.Python,
		workDir:   opts.WorkDir,
		log:       opts.Logger,
		maxOutput: opts.MaxOutput,
		maxResult: MaxPythonResult,
		user:      opts.User,
		nats:      opts.NATS,
		results:   opts.Results,
		duckdb:    opts.DuckDB,
		dataDir:   opts.DataDir,

		allowLinkLocal: opts.AllowLinkLocal,
	}
	if r.dataDir == "" {
		r.dataDir = filepath.Join(os.TempDir(), "noetl-data")
	}
	if r.python == "" {
		r.python = "python3"
	}
	if r.workDir == "" {
		r.workDir = os.TempDir()
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.maxOutput <= 0 {
		r.maxOutput = DefaultMaxOutput
	}
	r.duckdb = sqlEngine(r.duckdb, r.user, r.dataDir, r.log)
	r.transport = newTransport(false, !r.allowLinkLocal)
	r.insecureTransport = newTransport(true, !r.allowLinkLocal)
	return r
}

// newTransport is a pooled transport; guard refuses connections to
// link-local and metadata addresses (guardDial).
func newTransport(insecure, guard bool) *http.Transport {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if guard {
		dialer.Control = guardDial
	}
	t := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	if insecure {
		t.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the playbook asked for verify_ssl: false
	}
	return t
}

// Call identifies the command a tool runs for: python's `context` global and the
// playbook tool's parent come from it.
type Call struct {
	ExecutionID string
	Step        string
	// CommandID and Attempt are the claim the tools run under: the keychain
	// answers a credential's data to its holder only (docs/security.md).
	CommandID string
	Attempt   int
}

type callKey struct{}

// WithCall returns ctx carrying the execution and step the tools run for. The worker
// sets it before running a command (single tool or pipeline).
func WithCall(ctx context.Context, c Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// CallFrom returns the Call set by WithCall (zero if none).
func CallFrom(ctx context.Context) Call {
	c, _ := ctx.Value(callKey{}).(Call)
	return c
}

// Config keys that carry the call when ctx does not (see WithCall).
const (
	ConfigExecutionID = "_execution_id"
	ConfigStep        = "_step"
)

// callFor is the Call of one item: ctx first, then the config keys, then the item label
// as the step.
func callFor(ctx context.Context, it pipeline.Item) Call {
	c := CallFrom(ctx)
	if c.ExecutionID == "" {
		if v, ok := it.Config[ConfigExecutionID]; ok && v != nil {
			c.ExecutionID = tmpl.Text(v)
		}
	}
	if c.Step == "" {
		if v, ok := it.Config[ConfigStep]; ok && v != nil {
			c.Step = tmpl.Text(v)
		}
	}
	if c.Step == "" {
		c.Step = it.Label
	}
	return c
}

// Exec runs one tool attempt and satisfies pipeline.Exec. It never panics: a panic in
// a tool becomes an error envelope.
func (r *Registry) Exec(ctx context.Context, it pipeline.Item) (env toolresult.Envelope) {
	start := time.Now()
	kind := it.Kind
	if kind == "" {
		kind, _ = valueOf(it.Config, toolkind.CommonNames("kind")...).(string)
	}
	if it.Config == nil {
		it.Config = map[string]any{}
	}
	if it.Input == nil {
		it.Input = map[string]any{}
	}
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("tool panicked", "kind", kind, "label", it.Label, "panic", p, "stack", string(debug.Stack()))
			env = failure(toolresult.KindTool, fmt.Sprintf("%s tool panicked: %v", kind, p))
		}
		// Rounded up: a tool that ran at all reports at least 1 ms, so duration_ms is
		// always present in the envelope's map (which omits 0).
		env.DurationMs = max((time.Since(start) + time.Millisecond - 1).Milliseconds(), 1)
		r.log.Debug("tool finished", "kind", kind, "label", it.Label, "status", env.Status, "duration_ms", env.DurationMs)
	}()
	if ctx.Err() != nil {
		return ctxEnvelope(ctx, kind+" tool did not start")
	}
	if kind == "" {
		return failure(toolresult.KindTool, "tool kind is missing")
	}
	run, ok := runners[kind]
	if !ok {
		return failure(toolresult.KindTool, fmt.Sprintf("tool kind %s is not supported by this worker", kind))
	}
	return run(r, ctx, it)
}

// runners is each tool kind's tool (read only).
var runners = map[string]func(*Registry, context.Context, pipeline.Item) toolresult.Envelope{
	toolkind.Noop:     (*Registry).runNoop,
	toolkind.Python:   (*Registry).runPython,
	toolkind.HTTP:     (*Registry).runHTTP,
	toolkind.Postgres: (*Registry).runPostgres,
	toolkind.Shell:    (*Registry).runShell,
	toolkind.Playbook: (*Registry).runPlaybook,
	toolkind.NATS:     (*Registry).runNATS,
	toolkind.Artifact: (*Registry).runArtifact,
	toolkind.DuckDB:   (*Registry).runDuckDB,
	toolkind.Transfer: (*Registry).runTransfer,
}

// failure is an error envelope without data.
func failure(kind, msg string) toolresult.Envelope {
	return toolresult.Envelope{
		Status: toolresult.StatusError,
		Error:  &toolresult.ErrorInfo{Message: msg, Kind: kind, Retryable: retryable(kind)},
	}
}

// timeoutEnvelope is the envelope of a tool stopped by its deadline or cancellation.
func timeoutEnvelope(msg string) toolresult.Envelope {
	return toolresult.Envelope{
		Status: toolresult.StatusTimeout,
		Error:  &toolresult.ErrorInfo{Message: msg, Kind: toolresult.KindTimeout, Retryable: true},
	}
}

// ctxEnvelope explains why ctx ended: the step deadline or a cancellation. Both are
// `timeout` envelopes (the tool was stopped, not broken).
func ctxEnvelope(ctx context.Context, what string) toolresult.Envelope {
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return timeoutEnvelope(fmt.Sprintf("%s: %v", what, cause))
	}
	if ctx.Err() == context.DeadlineExceeded {
		return timeoutEnvelope(what + ": step deadline exceeded")
	}
	return timeoutEnvelope(what + ": cancelled")
}

// retryable mirrors R-R6: timeouts, connection errors and HTTP 429/5xx.
func retryable(kind string) bool {
	switch kind {
	case toolresult.KindTimeout, toolresult.KindConnection, toolresult.KindRateLimit, toolresult.KindServerError:
		return true
	}
	return false
}

// withToolTimeout bounds ctx by the tool's own `timeout` (alias `timeout_seconds`) in
// seconds when given and positive; it also returns that duration (0: none). The
// cause set on expiry names the tool timeout in messages (see ctxEnvelope).
func withToolTimeout(ctx context.Context, cfg map[string]any) (context.Context, context.CancelFunc, time.Duration, error) {
	d, err := durationField(cfg, toolkind.CommonNames("timeout")...)
	if err != nil || d <= 0 {
		return ctx, func() {}, 0, err
	}
	c, cancel := context.WithTimeoutCause(ctx, d, fmt.Errorf("tool timeout of %s exceeded", d))
	return c, cancel, d, nil
}
