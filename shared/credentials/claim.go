package credentials

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/noetl-go/noetl/shared/credscope"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/tmpl"
	"github.com/noetl-go/noetl/shared/toolkind"
)

// Who gets a credential's data (docs/security.md, "Secret reads"): the
// holder of a live claim — a command of the execution, CLAIMED or RUNNING
// under an unexpired lease — whose step names the credential (auth: or
// credential:, in the tool, a pipeline task or a nested tool config such
// as a transfer's source and target), for an execution the credential's
// scope allows (its playbook path and pool).
//
// How closely the claim is identified depends on what the reader sends:
//   - command_id, worker_id and attempt (our worker): that command, held by
//     that worker at that attempt (R-L8's fence); anything else is refused;
//   - worker_id alone: a command that worker holds;
//   - execution_id alone (NoETL's Rust worker): some command of the
//     execution naming the credential is held right now. It proves the
//     execution needs the credential at this moment, not that the reader is
//     the holder: any holder of the worker scope could read it then.
//
// A tokenless caller never reaches this (the route takes a token); on an
// open stack every caller holds every scope, so the claim is what remains.

// claimFor finds the claim that entitles ask to the data of the credential
// named alias, for execution executionID, or says why none does. ask is the
// claim the reader presents.
func (s *Service) claimFor(ctx context.Context, alias string, scope credscope.Scope, executionID int64, ask store.ClaimAsk) (store.ClaimHeld, string) {
	sh, err := s.st.ShardFor(executionID)
	if err != nil {
		return store.ClaimHeld{}, fmt.Sprintf("execution %d is not known here", executionID)
	}
	ex, err := store.LiveClaims(ctx, sh.Pool(), executionID, ask.CommandID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.ClaimHeld{}, fmt.Sprintf("execution %d is not known here", executionID)
	case err != nil:
		return store.ClaimHeld{}, fmt.Sprintf("execution %d: its claims could not be read: %v", executionID, err)
	}
	switch ex.Status {
	case lifecycle.ExecutionCompleted, lifecycle.ExecutionFailed, lifecycle.ExecutionCancelled:
		return store.ClaimHeld{}, fmt.Sprintf("execution %d is %s; credential data is given only while an execution runs", executionID, ex.Status)
	}
	if err := scope.Playbook(ex.Path); err != nil {
		return store.ClaimHeld{}, err.Error()
	}
	if err := scope.Pool(ex.Pool); err != nil {
		return store.ClaimHeld{}, err.Error()
	}
	for _, c := range ex.Claims {
		if ask.WorkerID != "" && c.WorkerID != ask.WorkerID || ask.Attempt != 0 && c.Attempt != ask.Attempt {
			continue
		}
		if NamesCredential(c.Context, alias) {
			return c, ""
		}
	}
	if ask.CommandID != "" {
		return store.ClaimHeld{}, fmt.Sprintf("command %s of execution %d is not held by worker %q at attempt %d under a live lease with a step naming credential %q (auth: or credential:); credential data is given only to such a claim",
			ask.CommandID, executionID, ask.WorkerID, ask.Attempt, alias)
	}
	return store.ClaimHeld{}, fmt.Sprintf("no command of execution %d is held under a live lease with a step naming credential %q (auth: or credential:); credential data is given only to the holder of such a command",
		executionID, alias)
}

// NamesCredential reports whether a command's payload names the credential
// alias where a tool reads one: under auth or credential (a string, or an
// object naming it under credential, alias or key) anywhere in its tool
// config, pipeline tasks included, but not in its input (args), which is
// data. A pipeline task's templated name is rendered with the command's
// render_context, as the worker renders it.
func NamesCredential(payload map[string]any, alias string) bool {
	rc, _ := payload["render_context"].(map[string]any)
	return namesIn(payload["tool_config"], alias, rc)
}

func namesIn(v any, alias string, rc map[string]any) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			switch {
			case k == "args" || k == "input":
				continue
			case isAuthKey(k) && authNames(val, alias, rc):
				return true
			case namesIn(val, alias, rc):
				return true
			}
		}
	case []any:
		for _, e := range x {
			if namesIn(e, alias, rc) {
				return true
			}
		}
	}
	return false
}

func isAuthKey(k string) bool {
	for _, n := range toolkind.CommonNames("auth") {
		if k == n {
			return true
		}
	}
	return false
}

// authNames reports whether an auth value names alias.
func authNames(v any, alias string, rc map[string]any) bool {
	switch x := v.(type) {
	case string:
		return rendered(x, rc) == alias
	case map[string]any:
		for _, k := range []string{"credential", "alias", "key"} {
			if s, ok := x[k].(string); ok && rendered(s, rc) == alias {
				return true
			}
		}
	}
	return false
}

// rendered is s with its templates rendered against the command's
// render_context ("" when that fails: nothing is named then).
func rendered(s string, rc map[string]any) string {
	s = strings.TrimSpace(s)
	if !tmpl.HasTemplate(s) {
		return s
	}
	t, err := tmpl.Compile(s)
	if err != nil {
		return ""
	}
	out, err := t.Render(tmpl.Env{Vars: rc})
	if err != nil {
		return ""
	}
	return strings.TrimSpace(tmpl.Text(out))
}
