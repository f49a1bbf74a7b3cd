package worker

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/redact"
	"github.com/noetl-go/noetl/shared/resultstore"
	"github.com/noetl-go/noetl/shared/tools"
)

// Standard is a worker with the standard tools.
type Standard struct {
	// Server is the control plane's URL; Token a worker-scope token.
	Server, Token string
	// APIToken is an api-scope token for the playbook tool, which starts and
	// reads child executions (routes of the api scope, R-A3); default Token.
	APIToken    string
	JS          jetstream.JetStream
	Pool, ID    string
	Concurrency int
	// Python is the interpreter; it is resolved to its real path once, so a
	// version manager's shim is not paid for on every step.
	Python string
	// Credentials resolve auth: aliases the control plane's keychain does
	// not hold (it is asked first); default the environment (R-P4).
	Credentials tools.Credentials
	// Results and InlineLimit: see Config (results over the limit are stored
	// by reference).
	Results     resultstore.Store
	InlineLimit int
	// Transport, when set, carries the worker's requests to the server (the
	// bench counts them); default the client's own pooled transport.
	Transport http.RoundTripper
	// MaxAnswerBytes bounds the server's answers the worker reads; default
	// client.MaxAnswerBytes.
	MaxAnswerBytes int
	// PoolHeartbeat: see Config.
	PoolHeartbeat time.Duration
	Logger        *slog.Logger
	// ToolUser runs python and shell as that account (a name or uid, see
	// tools.LookupUser); "": as the worker. `noetl worker` defaults it to
	// tools.DefaultToolUser().
	ToolUser string
	// Secrets are what the worker masks in everything it posts and logs; the
	// tokens and every credential are added to it. Nil: a set of its own
	// (noetl dev shares one with the server's logs).
	Secrets *redact.Secrets
	// DuckDB is the embedded DuckDB engine the duckdb and transfer tools use
	// (shared/tools/duckdb, which needs cgo: the noetl binary plugs it in);
	// nil: duckdb steps fail saying so. DataDir holds its per-execution files
	// (default <temp dir>/noetl-data).
	DuckDB  tools.SQLEngine
	DataDir string
	// AllowLinkLocal lets the http, transfer and script-source tools reach
	// link-local and cloud metadata addresses (tools.LinkLocalEnv).
	AllowLinkLocal bool
}

// Build returns the configured worker.
func (s Standard) Build(ctx context.Context) (*Worker, error) {
	secrets := s.Secrets
	if secrets == nil {
		secrets = &redact.Secrets{}
	}
	apiToken := s.APIToken
	if apiToken == "" {
		apiToken = s.Token
	}
	secrets.Add(s.Token, apiToken)
	creds := s.Credentials
	if creds == nil {
		var err error
		if creds, err = tools.CredentialsFromEnv(nil); err != nil {
			return nil, err
		}
	}
	if l, ok := creds.(tools.SecretLister); ok {
		secrets.Add(l.Secrets()...)
	}
	// The keychain first (its data is masked once looked up, below), the
	// environment and the credentials file after.
	creds = tools.Chain{keychainCredentials{cl: client.New(s.Server, s.Token), workerID: s.ID}, creds}
	logger := s.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = slog.New(redact.LogHandler(logger.Handler(), secrets))
	var user *tools.User
	if s.ToolUser != "" {
		var err error
		if user, err = tools.LookupUser(s.ToolUser); err != nil {
			return nil, err
		}
	}
	python := tools.ResolvePython(ctx, s.Python, user)
	var opts []client.Option
	if s.Transport != nil {
		opts = append(opts, client.WithTransport(s.Transport))
	}
	if s.MaxAnswerBytes > 0 {
		opts = append(opts, client.WithMaxAnswerBytes(s.MaxAnswerBytes))
	}
	cl := client.New(s.Server, s.Token, opts...)
	results := s.Results
	if results == nil {
		results = ServerResults(cl) // the worker's and its artifact tool's
	}
	reg := tools.New(tools.Options{Credentials: maskingCredentials{creds, secrets}, Children: &Children{Client: client.New(s.Server, apiToken)},
		Python: python, User: user, Logger: logger, NATS: s.JS, Results: results, DuckDB: s.DuckDB, DataDir: s.DataDir,
		AllowLinkLocal: s.AllowLinkLocal})
	if err := reg.CheckUser(ctx); err != nil {
		return nil, err
	}
	if user != nil {
		logger.Info("python and shell steps run as "+user.String(), "python", python)
	}
	return New(Config{Client: cl, JS: s.JS, Pool: s.Pool, WorkerID: s.ID,
		Concurrency: s.Concurrency, Exec: reg.Exec, Claim: reg.Claim, AwaitClaim: reg.AwaitClaim, CloseTools: reg.Close, Results: results, InlineLimit: s.InlineLimit, Logger: logger, Secrets: secrets,
		PoolHeartbeat: s.PoolHeartbeat})
}
