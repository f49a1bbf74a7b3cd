package worker

import (
	"context"
	"log/slog"
	"net/http"
	"os"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/client"
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
	// Credentials resolve auth: aliases; default the environment (R-P4).
	Credentials tools.Credentials
	// Results and InlineLimit: see Config (results over the limit are stored
	// by reference).
	Results     resultstore.Store
	InlineLimit int
	// Transport, when set, carries the worker's requests to the server (the
	// bench counts them); default the client's own pooled transport.
	Transport http.RoundTripper
	Logger    *slog.Logger
}

// Build returns the configured worker.
func (s Standard) Build(ctx context.Context) (*Worker, error) {
	creds := s.Credentials
	if creds == nil {
		var err error
		if creds, err = tools.CredentialsFromEnv(os.Getenv); err != nil {
			return nil, err
		}
	}
	apiToken := s.APIToken
	if apiToken == "" {
		apiToken = s.Token
	}
	reg := tools.New(tools.Options{Credentials: creds, Children: &Children{Client: client.New(s.Server, apiToken)},
		Python: tools.ResolvePython(ctx, s.Python), Logger: s.Logger})
	var opts []client.Option
	if s.Transport != nil {
		opts = append(opts, client.WithTransport(s.Transport))
	}
	return New(Config{Client: client.New(s.Server, s.Token, opts...), JS: s.JS, Pool: s.Pool, WorkerID: s.ID,
		Concurrency: s.Concurrency, Exec: reg.Exec, Results: s.Results, InlineLimit: s.InlineLimit, Logger: s.Logger})
}
