package worker

import (
	"context"
	"os"
	"strings"

	"github.com/noetl-go/noetl/shared/redact"
	"github.com/noetl-go/noetl/shared/toolresult"
	"github.com/noetl-go/noetl/shared/tools"
	"github.com/noetl-go/noetl/shared/wire"
)

// mask replaces every secret the worker knows in what a tool run returned,
// before anything is posted or logged from it: the worker's tokens and
// credentials (Config.Secrets) and the strings under secret-named keys of the
// command itself (a templated password in the step's config). So a step that
// prints a password it was given, or finds a token some other way, posts
// [REDACTED] in its place (see redact.Masker for what is matched).
func (w *Worker) mask(cmd *wire.Command, env toolresult.Envelope) toolresult.Envelope {
	m := w.cfg.Secrets.Masker().With(redact.Collect(map[string]any(cmd.Context))...)
	if m.Empty() {
		return env
	}
	env.Data = m.Value(env.Data)
	env.Stdout, env.Stderr = m.String(env.Stdout), m.String(env.Stderr)
	if env.Error != nil {
		e := *env.Error
		e.Message = m.String(e.Message)
		env.Error = &e
	}
	return env
}

// maskingCredentials registers every credential a tool looks up, so a store
// that cannot list its secrets up front still has them masked.
type maskingCredentials struct {
	tools.Credentials
	secrets *redact.Secrets
}

func (c maskingCredentials) Lookup(ctx context.Context, alias string) (tools.Credential, error) {
	cred, err := c.Credentials.Lookup(ctx, alias)
	if err == nil {
		c.secrets.Add(cred.Secrets()...)
	}
	return cred, err
}

// SecretEnv reports whether an environment variable holds a secret the worker
// reads: a token (NOETL_WORKER_TOKEN, NOETL_API_TOKEN, … by the key rule of
// shared/redact) or a NOETL_CREDENTIAL_<ALIAS> entry.
func SecretEnv(name string) bool {
	return strings.HasPrefix(name, "NOETL_CREDENTIAL_") || redact.SecretKey(name)
}

// Protect hardens a process that runs tools, once it has read its
// configuration (tokens, credentials):
//
//   - it removes the secret variables (SecretEnv) from its environment, so no
//     process it starts without an explicit environment inherits them;
//   - on Linux it marks itself non-dumpable (prctl PR_SET_DUMPABLE 0). The
//     kernel then owns /proc/<pid>/environ, mem and the like as root, and a
//     process of the same user (every python or shell step, when tools run as
//     the worker's user) can no longer read them. This is what keeps the
//     tokens out of reach: /proc/<pid>/environ shows the environment the
//     process started with, which os.Unsetenv does not change. The cost: no
//     core dumps, and a debugger must attach as root.
//
// A worker running as root gets no protection from either against tools that
// also run as root: run tools as another user (Standard.ToolUser; `noetl
// worker` defaults to nobody under root).
func Protect() error {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); SecretEnv(name) {
			if err := os.Unsetenv(name); err != nil {
				return err
			}
		}
	}
	return setNonDumpable()
}
