package wire

import (
	"encoding/json"

	"github.com/noetl-go/noetl/shared/credscope"
)

// ---- keychain, execution variables, staged results (NoETL's worker services) ----

// Credential is a keychain entry in NoETL's CredentialResponse shape. Data is
// there only when GET /api/credentials/{identifier}?include_data=true was
// answered to a worker for a running execution.
type Credential struct {
	ID          ID               `json:"id"`
	Name        string           `json:"name" doc:"the alias playbooks name (auth: <name>)"`
	Type        string           `json:"type" doc:"postgres, bearer, api_key, basic, http, generic, … (NoETL's credential types)"`
	Meta        Object           `json:"meta,omitempty" doc:"metadata, not secret"`
	Tags        []string         `json:"tags"`
	Description string           `json:"description,omitempty"`
	Scope       *CredentialScope `json:"scope,omitempty" doc:"where the credential may be used (ours; absent: anywhere); a worker reading the data gets the hosts it may send it to"`
	KeyID       string           `json:"key_id" doc:"the keychain key the data is sealed under (a key file's key id or a KMS key ARN)"`
	CreatedAt   Time             `json:"created_at"`
	UpdatedAt   Time             `json:"updated_at"`
	Data        Object           `json:"data,omitempty" doc:"the credential's data: only with include_data=true, to the worker scope, for a running execution"`
	Created     *bool            `json:"created,omitempty" doc:"POST only: true when the credential is new, false when it was replaced"`
}

// CredentialScope is a credential's scope (shared/credscope owns its rules).
type CredentialScope = credscope.Scope

// CredentialList answers GET /api/credentials (NoETL's CredentialListResponse).
type CredentialList struct {
	Items  []Credential     `json:"items"`
	Filter CredentialFilter `json:"filter"`
}

// CredentialFilter is the filter a list applied.
type CredentialFilter struct {
	Type string `json:"type,omitempty"`
	Q    string `json:"q,omitempty"`
}

// CredentialDeleted answers DELETE /api/credentials/{identifier}.
type CredentialDeleted struct {
	Message string `json:"message"`
	ID      ID     `json:"id"`
}

// CredentialRead is one logged read of a credential (never its data).
type CredentialRead struct {
	ReadID       ID        `json:"read_id"`
	ReadAt       Time      `json:"read_at"`
	Name         string    `json:"name"`
	CredentialID OptID     `json:"credential_id"`
	ExecutionID  OptID     `json:"execution_id"`
	IncludeData  bool      `json:"include_data"`
	Outcome      string    `json:"outcome" enum:"served,refused,not_found"`
	Reason       OptString `json:"reason"`
	Scope        string    `json:"scope" doc:"the reader's token scope (open: the API runs without tokens)"`
	Token        OptString `json:"token" doc:"a fingerprint of the reader's token (sha256 prefix), never the token"`
	WorkerID     OptString `json:"worker_id" doc:"a served read: the worker holding the claim it was answered for (from the command, never from the request)"`
	CommandID    OptString `json:"command_id" doc:"a served read: the command whose step names the credential"`
	RequestID    OptString `json:"request_id"`
}

// CredentialReads answers GET /api/credentials/{identifier}/reads.
type CredentialReads struct {
	Items []CredentialRead `json:"items"`
}

// Rotation answers POST /api/credentials/rotate.
type Rotation struct {
	KeyID     string `json:"key_id" doc:"the key new credentials are sealed under"`
	NewKey    bool   `json:"new_key" doc:"true when this call made that key"`
	Resealed  int    `json:"resealed" doc:"credentials moved under key_id by this call"`
	Remaining int    `json:"remaining" doc:"credentials still under an older key: call again until 0"`
}

// VariablesSet answers POST /api/vars/{execution_id} (NoETL's Python and Rust
// servers' answers together).
type VariablesSet struct {
	ExecutionID  ID       `json:"execution_id"`
	VariablesSet int      `json:"variables_set"`
	VarNames     []string `json:"var_names"`
	Status       string   `json:"status" enum:"ok"`
	EventID      ID       `json:"event_id" doc:"the ctx.updated event that recorded the values"`
}

// Variable answers GET /api/vars/{execution_id}/{var_name}: value (NoETL's
// Python server's name) and var_value (its Rust server's) carry the same value.
type Variable struct {
	ExecutionID ID     `json:"execution_id"`
	VarName     string `json:"var_name"`
	Value       Value  `json:"value"`
	VarValue    Value  `json:"var_value"`
}

// Variables answers GET /api/vars/{execution_id}.
type Variables struct {
	ExecutionID ID                       `json:"execution_id"`
	Variables   map[string]VariableValue `json:"variables"`
	Count       int                      `json:"count"`
}

// VariableValue is one variable of a Variables list.
type VariableValue struct {
	Value Value `json:"value"`
}

// MaxStagedResultBytes is the body limit of PUT /api/result/{execution_id}:
// under Lambda's 6 MiB request payload, and far over NoETL's Rust worker's
// 100 KiB inline budget. A larger result gets 413 (our worker does not send
// it: it fails the step naming the size, this limit and --result-store), and
// NoETL's Rust worker then reports the step failed (noetlwire.Result) rather
// than losing the data.
const MaxStagedResultBytes = 5 << 20

// StageRequest is what our worker sends to PUT /api/result/{execution_id}
// when it has no result store of its own: a name for the result (the
// command's id and attempt; NoETL's workers send the step's name) and the
// step's data, already JSON.
type StageRequest struct {
	Name string          `json:"name"`
	Data json.RawMessage `json:"data"`
}

// StagedResult answers PUT /api/result/{execution_id} (NoETL's
// ResultPutResponse): ref is the noetl:// reference GET /api/result/resolve
// reads back.
type StagedResult struct {
	Ref       string    `json:"ref" doc:"noetl://execution/<execution_id>/result/<name>/<id>"`
	Store     string    `json:"store" doc:"the result store's kind: file or s3"`
	Scope     string    `json:"scope"`
	ExpiresAt OptString `json:"expires_at"`
	Bytes     int64     `json:"bytes"`
	Sha256    string    `json:"sha256"`
}
