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
// keychain (GET /api/credentials/{alias}?include_data=true&execution_id=…),
// the data for the execution the step runs in. An alias the keychain does
// not hold, and a server without a keychain key (503), are "not configured",
// so the next store (the environment, the credentials file) is asked: setups
// without a keychain keep working. A refusal (403) is an error.
type keychainCredentials struct {
	cl       *client.Client
	workerID string
}

func (k keychainCredentials) Lookup(ctx context.Context, alias string) (tools.Credential, error) {
	eid, _ := strconv.ParseInt(tools.CallFrom(ctx).ExecutionID, 10, 64)
	c, err := k.cl.Credential(ctx, alias, client.CredentialQuery{IncludeData: true, ExecutionID: eid, WorkerID: k.workerID})
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
	return cred, nil
}
