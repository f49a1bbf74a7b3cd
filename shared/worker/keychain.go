package worker

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/tools"
)

// keychainCredentials resolves auth: aliases through the control plane's
// keychain (GET /api/credentials/{alias}?include_data=true&execution_id=…
// &command_id=…&worker_id=…&attempt=…), the data for the claim the step
// runs under, with the hosts the credential may be sent to. An alias the keychain does
// not hold, and a server without a keychain key (503), are "not configured",
// so the next store (the environment, the credentials file) is asked: setups
// without a keychain keep working. A refusal (403) is an error.
type keychainCredentials struct {
	cl       *client.Client
	workerID string
}

func (k keychainCredentials) Lookup(ctx context.Context, alias string) (tools.Credential, error) {
	call := tools.CallFrom(ctx)
	eid, _ := strconv.ParseInt(call.ExecutionID, 10, 64)
	c, err := k.cl.Credential(ctx, alias, client.CredentialQuery{IncludeData: true, ExecutionID: eid, CommandID: call.CommandID,
		WorkerID: k.workerID, Attempt: call.Attempt})
	switch client.StatusOf(err) {
	case 0:
		if err != nil {
			return tools.Credential{}, fmt.Errorf("credential alias %q: the keychain: %w", alias, err)
		}
	case http.StatusNotFound, http.StatusServiceUnavailable:
		return tools.Credential{}, fmt.Errorf("credential alias %q is not in the keychain: %w", alias, tools.ErrCredentialNotConfigured)
	default:
		return tools.Credential{}, fmt.Errorf("credential alias %q: the keychain refused it: %w", alias, err)
	}
	cred, err := tools.CredentialFromNoETL(c.Type, c.Data)
	if err != nil {
		return tools.Credential{}, fmt.Errorf("credential alias %q (keychain, type %s): %w", alias, c.Type, err)
	}
	if c.Scope != nil {
		cred.AllowedHosts = c.Scope.Hosts // where the tools may send it (tools.CheckCredentialHost)
	}
	return cred, nil
}
