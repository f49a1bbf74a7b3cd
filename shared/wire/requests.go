package wire

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/noetl-go/noetl/shared/ids"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/lifecycle"
)

// The request bodies, each declared once: our client sends these types, the
// server reads a body into the same type with jsonx.Read (its messages name
// the field path: `events[3].event_type: required`), and the OpenAPI
// document's request shapes are derived from it (shared/api/shapes.go).
//
// Request tags, beside `json` and `doc`: `alias` lists NoETL's other names of
// a field, `required:"true"` refuses a body without it, `min` and `max` bound
// an integer (and `max` a list, whose `items` name what it holds in the 413),
// `ignored:"true"` marks a field NoETL's clients send that is documented but
// not read, `enum` lists a string's values for the document, and `openapi`
// describes a field otherwise than its type would: "integer" (a plain JSON
// integer), "ids" (a list of ids), "nullable", "required" (the type's Check
// or its reader says what is missing), or "-" (read, not described).
// A doc's {min} and {max} are the field's bounds.

// Limits of the lists a request carries.
const (
	// MaxBatchEvents bounds the events (and a report's events and claims)
	// of one request.
	MaxBatchEvents = 500
	// MaxTake bounds how many commands one report can take.
	MaxTake = 1000
)

// ---- the catalog ----

// RegisterRequest is the body of POST /api/catalog/register.
type RegisterRequest struct {
	Content      string `json:"content" required:"true" doc:"the playbook's YAML, or that YAML base64-encoded"`
	ResourceType string `json:"resource_type,omitempty" doc:"\"Playbook\" (the only kind)"`
}

// ValidateRequest is the body of POST /api/catalog/playbooks/validate.
type ValidateRequest struct {
	Content string `json:"content" required:"true" doc:"the playbook's YAML, or that YAML base64-encoded"`
}

// CatalogListRequest is the body of POST /api/catalog/list (NoETL's spelling
// of GET /api/catalog).
type CatalogListRequest struct {
	Path         string `json:"path,omitempty"`
	Limit        int    `json:"limit,omitempty" min:"1" max:"1000"`
	Latest       bool   `json:"latest,omitempty"`
	Cursor       string `json:"cursor,omitempty"`
	ResourceType string `json:"resource_type,omitempty"`
}

// CatalogResourceRequest is the body of POST /api/catalog/resource: a
// catalog_id, or a path and a version.
type CatalogResourceRequest struct {
	CatalogID    ID      `json:"catalog_id,omitempty"`
	Path         string  `json:"path,omitempty"`
	Version      Version `json:"version,omitempty" doc:"a version number, or \"latest\""`
	ResourceType string  `json:"resource_type,omitempty"`
}

// Check: exactly one of catalog_id and path; a version only with a path.
func (r *CatalogResourceRequest) Check(f jsonx.Fields) error {
	switch {
	case r.CatalogID != 0 && r.Path != "":
		return jsonx.Refuse(f.Name("catalog_id"), "give exactly one of path and catalog_id, not both")
	case r.CatalogID != 0 && r.Version != 0:
		return jsonx.Refuse(f.Name("version"), "a catalog_id names one version already; give version with path only")
	case r.CatalogID == 0 && r.Path == "":
		return jsonx.Refuse(f.Name("path"), "required: give the playbook's path or its catalog_id")
	}
	return nil
}

// ---- executions ----

// ExecuteRequest is the body of POST /api/execute: Path or CatalogID.
type ExecuteRequest struct {
	Path              string  `json:"path,omitempty" doc:"exactly one of path and catalog_id"`
	CatalogID         ID      `json:"catalog_id,omitempty"`
	Version           Version `json:"version,omitempty" doc:"with path: a version number, or \"latest\" (default); with catalog_id: ignored, as NoETL does"`
	Payload           Object  `json:"payload" alias:"workload" doc:"the workload's overrides (alias workload)"`
	ParentExecutionID ID      `json:"parent_execution_id,omitempty"`
	Pool              string  `json:"execution_pool,omitempty"`
	IdempotencyKey    string  `json:"idempotency_key,omitempty" doc:"a repeated key answers the first execution"`
	ResourceKind      string  `json:"resource_kind,omitempty" doc:"NoETL's: \"playbook\" (the only kind)"`
	Merge             bool    `json:"merge,omitempty" ignored:"true" doc:"NoETL's: the payload is always merged over the playbook's workload, key by key"`
}

// Check: exactly one of path and catalog_id. A catalog_id names one version
// already; NoETL's clients (its GUI's terminal) send that entry's version
// beside it, and NoETL's servers ignore it: so does this.
func (r *ExecuteRequest) Check(f jsonx.Fields) error {
	switch {
	case r.Path != "" && r.CatalogID != 0:
		return jsonx.Refuse(f.Name("catalog_id"), "give exactly one of path and catalog_id, not both")
	case r.Path == "" && r.CatalogID == 0:
		return jsonx.Refuse(f.Name("path"), "required: give the playbook's path or its catalog_id")
	case r.CatalogID != 0:
		r.Version = 0
	}
	return nil
}

// CancelRequest is the body of POST /api/executions/{id}/cancel (and /stop).
type CancelRequest struct {
	Reason  string `json:"reason,omitempty"`
	Cascade *bool  `json:"cascade,omitempty" doc:"false: the execution only, its children run on; default true: its children too"`
}

// CleanupRequest is the body of POST /api/executions/cleanup (NoETL's).
type CleanupRequest struct {
	OlderThanMinutes *int `json:"older_than_minutes,omitempty" min:"1" max:"525600" doc:"cancel running executions nothing moved for this many minutes (no event, no command a worker holds under a live lease, no child moving); default 5"`
	DryRun           bool `json:"dry_run,omitempty" doc:"list them, cancel nothing"`
}

// RerunRequest is the body of POST /api/executions/{id}/rerun.
type RerunRequest struct {
	Workload     Object `json:"workload,omitempty" alias:"payload" doc:"keys replacing the execution's workload's"`
	ResourceKind string `json:"resource_kind,omitempty" doc:"\"playbook\" (the only kind)"`
}

// RedriveRequest is the body of POST /api/executions/{id}/redrive.
type RedriveRequest struct {
	Version int `json:"version,omitempty" min:"1" max:"2147483647" doc:"the version of the execution's playbook to continue under: its own (the default) or a newer one"`
}

// RedriveManyRequest is the body of POST /api/executions/redrive: the
// executions to redrive (a what-if's would_complete ids, say).
type RedriveManyRequest struct {
	Executions []ID `json:"executions" required:"true" max:"100" items:"execution ids" doc:"1 to {max} execution ids, each redriven once"`
	Version    int  `json:"version,omitempty" min:"1" max:"2147483647" doc:"the version each continues under (default: each its own)"`
}

// FinalizeRequest is the body of POST /api/executions/{id}/finalize.
type FinalizeRequest struct {
	Status string `json:"status" required:"true" doc:"COMPLETED or FAILED, in any case"`
	Error  string `json:"error,omitempty"`
}

// ---- the worker protocol ----

// ClaimRequest is the body of POST /api/commands/{event_id}/claim. Start
// records the start with the claim (the caller runs the command at once), so
// no command.started is posted.
type ClaimRequest struct {
	WorkerID string `json:"worker_id" required:"true"`
	Start    bool   `json:"start,omitempty" doc:"also mark the command started"`
}

// HeartbeatRequest is the body of POST /api/commands/{event_id}/heartbeat.
type HeartbeatRequest struct {
	WorkerID string `json:"worker_id" required:"true"`
	Attempt  int    `json:"attempt" min:"1" max:"2147483647" doc:"the claim's attempt (fences a stale holder)"`
}

// EventFields are NoETL's EventRequest fields but execution_id: what a
// worker posts about one step or command (shared/noetlwire reads them onto
// an event).
type EventFields struct {
	EventType  string    `json:"event_type" alias:"name" required:"true" doc:"required (or its alias name)"`
	Step       string    `json:"step" alias:"node_name"`
	Payload    Object    `json:"payload" alias:"context" doc:"NoETL's workers put the tool's output in payload.response and {status: COMPLETED|FAILED, context} in payload.result (docs/noetl-compat.md)"`
	Meta       OptObject `json:"meta"`
	WorkerID   string    `json:"worker_id"`
	ResultKind string    `json:"result_kind,omitempty"`
	ResultURI  string    `json:"result_uri,omitempty"`
	// EventIDs are the parts of a result posted in pieces (NoETL's refs),
	// kept as sent.
	EventIDs    []any      `json:"event_ids,omitempty" openapi:"ids"`
	EventID     Scalar     `json:"event_id,omitempty" doc:"the client's id: re-posting it is idempotent"`
	Status      string     `json:"status"`
	Actionable  bool       `json:"actionable,omitempty"`
	Informative bool       `json:"informative,omitempty"`
	CreatedAt   ClientTime `json:"created_at,omitempty" doc:"kept in meta.client_created_at"`
}

// EventRequest is one event a worker posts (NoETL's EventRequest), alone to
// POST /api/events or in a Report.
type EventRequest struct {
	ExecutionID ID `json:"execution_id" required:"true"`
	EventFields
}

// BatchEvent is one event of a batch: its execution is the batch's.
type BatchEvent struct {
	ExecutionID ID `json:"execution_id,omitempty" openapi:"-"`
	EventFields
}

// BatchRequest is the body of POST /api/events/batch: events of one
// execution, all or nothing.
type BatchRequest struct {
	ExecutionID ID           `json:"execution_id" required:"true"`
	WorkerID    string       `json:"worker_id,omitempty"`
	Events      []BatchEvent `json:"events" required:"true" max:"500" items:"events in one request" doc:"1 to {max} events"`
}

// Check: at least one event, each of the batch's execution.
func (r *BatchRequest) Check(f jsonx.Fields) error {
	if len(r.Events) == 0 {
		return jsonx.Refuse(f.Name("events"), "at least one event is required")
	}
	for i, e := range r.Events {
		if e.ExecutionID != 0 && e.ExecutionID != r.ExecutionID {
			return jsonx.Refuse(f.Name("events["+strconv.Itoa(i)+"].execution_id"),
				"%d differs from the batch's execution_id %d; a batch belongs to one execution", e.ExecutionID, r.ExecutionID)
		}
	}
	return nil
}

// Report is our worker's one request per step (POST /api/worker/report): the
// events of any number of executions, the commands it claims (their
// command.issued event ids), and how many more commands it can start now.
type Report struct {
	WorkerID string         `json:"worker_id" required:"true"`
	Pool     string         `json:"pool"`
	Take     int            `json:"take" min:"0" max:"1000" doc:"how many issued commands to take, claimed and started (at most {max})"`
	Events   []EventRequest `json:"events,omitempty"`
	Claims   []ID           `json:"claims,omitempty" doc:"command.issued event ids to claim and start"`
}

// Check: one event or claim at least, MaxBatchEvents together at most.
func (r *Report) Check(f jsonx.Fields) error {
	switch n := len(r.Events) + len(r.Claims); {
	case n == 0:
		return jsonx.Refuse(f.Name("events"), "give at least one event or claim")
	case n > MaxBatchEvents:
		return &jsonx.TooMany{Field: f.Name("events and claims"), N: n, Max: MaxBatchEvents, Items: "in one request"}
	}
	return nil
}

// PoolRegistration is the body of POST /api/worker/pool/register our worker
// sends: NoETL's registration (its Python worker's fields; the Rust worker's
// runtime object and labels.pool_name are read too, by shared/noetlwire).
type PoolRegistration struct {
	Name          string `json:"name"`
	ComponentType string `json:"component_type"`
	Runtime       string `json:"runtime"`
	Status        string `json:"status"`
	Capacity      int    `json:"capacity"`
	PID           int    `json:"pid"`
	Hostname      string `json:"hostname"`
	Labels        Object `json:"labels"`
	Meta          Object `json:"meta"`
}

// PoolBeat is the body of POST /api/worker/pool/heartbeat and of
// /api/worker/pool/deregister our worker sends.
type PoolBeat struct {
	Name string `json:"name"`
}

// ---- the outbox and external events (the internal routes) ----

// OutboxClaimRequest is the body of POST /api/internal/outbox/claim.
type OutboxClaimRequest struct {
	Limit *int64 `json:"limit,omitempty" doc:"default 100; a value outside 1..1000 is clamped into it (as NoETL's server does)"`
}

// MarkPublishedRequest is the body of POST /api/internal/outbox/mark-published.
type MarkPublishedRequest struct {
	OutboxIDs []ID `json:"outbox_ids" required:"true" max:"1000" items:"ids"`
}

// MarkFailedRequest is the body of POST /api/internal/outbox/mark-failed.
type MarkFailedRequest struct {
	OutboxID        ID       `json:"outbox_id" required:"true"`
	Error           string   `json:"error" required:"true"`
	Attempts        int      `json:"attempts,omitempty" min:"0" max:"2147483647"`
	MaxDelaySeconds *float64 `json:"max_delay_seconds,omitempty"`
}

// Check: a delay in (0, 86400] seconds.
func (r *MarkFailedRequest) Check(f jsonx.Fields) error {
	if s := r.MaxDelaySeconds; s != nil && (*s <= 0 || *s > 86400) {
		return jsonx.Refuse(f.Name("max_delay_seconds"), "expected a number of seconds in (0, 86400], got %v", *s)
	}
	return nil
}

// ProjectRequest is the body of POST /api/internal/events/project.
type ProjectRequest struct {
	Events []Envelope `json:"events" required:"true" max:"500" items:"events in one request" doc:"1 to {max} envelopes (the replay data set's row shape)"`
}

// Check: at least one envelope.
func (r *ProjectRequest) Check(f jsonx.Fields) error {
	if len(r.Events) == 0 {
		return jsonx.Refuse(f.Name("events"), "at least one event is required")
	}
	return nil
}

// Envelope is an external event in NoETL's envelope (the replay data set's
// row shape). execution_id and event_type are optional, as in NoETL's
// envelope; one without them is counted in skipped.
type Envelope struct {
	EventID     ID         `json:"event_id" required:"true"`
	ExecutionID ID         `json:"execution_id,omitempty" doc:"without it the envelope is skipped"`
	EventType   string     `json:"event_type,omitempty" alias:"name"`
	NodeName    string     `json:"node_name,omitempty" alias:"step"`
	Status      string     `json:"status,omitempty"`
	Context     Object     `json:"context,omitempty" alias:"payload"`
	Meta        Object     `json:"meta,omitempty"`
	Result      Object     `json:"result,omitempty"`
	Error       string     `json:"error,omitempty"`
	WorkerID    string     `json:"worker_id,omitempty"`
	CommandID   Scalar     `json:"command_id,omitempty"`
	Timestamp   ClientTime `json:"timestamp,omitempty" doc:"the producer's time, kept in meta.client_created_at"`
	CreatedAt   ClientTime `json:"created_at,omitempty"`
	// Kept in meta, where replay reads them.
	StageID       Scalar `json:"stage_id,omitempty" doc:"kept in meta, as are the five below"`
	FrameID       Scalar `json:"frame_id,omitempty"`
	AggregateType Scalar `json:"aggregate_type,omitempty"`
	AggregateID   Scalar `json:"aggregate_id,omitempty"`
	NodeID        Scalar `json:"node_id,omitempty"`
	NodeType      Scalar `json:"node_type,omitempty"`
}

// ---- schedules ----

// ScheduleRequest is the body of POST /api/schedules and PATCH
// /api/schedules/{id} (PATCH: only the fields given change).
type ScheduleRequest struct {
	PlaybookPath    *string        `json:"playbook_path,omitempty" doc:"a registered playbook's path (required on create)"`
	PlaybookVersion *int           `json:"playbook_version,omitempty" min:"1" max:"2147483647" openapi:"integer,nullable" doc:"a version; null or absent: the latest when each run starts"`
	Cron            *string        `json:"cron,omitempty" doc:"5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first, or @daily etc.; exactly one of cron and interval_seconds"`
	IntervalSeconds *int64         `json:"interval_seconds,omitempty" min:"1" max:"1099511627776" openapi:"integer" doc:"due every N seconds since the Unix epoch (1 to a year)"`
	Timezone        *string        `json:"timezone,omitempty" doc:"IANA name the cron is read in; default UTC"`
	Enabled         *bool          `json:"enabled,omitempty" doc:"false pauses; default true"`
	InputPayload    map[string]any `json:"input_payload,omitempty" doc:"each run's workload overrides"`
	Overlap         *string        `json:"overlap,omitempty" enum:"skip,buffer_one,allow" doc:"while the previous run is going; default skip"`
	CatchupSeconds  *int64         `json:"catchup_seconds,omitempty" min:"1" max:"31622400" openapi:"integer" doc:"after an outage, due times older than this are skipped and recorded; default 60"`
	JitterSeconds   *int64         `json:"jitter_seconds,omitempty" min:"0" max:"86400" openapi:"integer" doc:"delay each run by up to this; default 0"`
	Meta            map[string]any `json:"meta,omitempty"`
}

// Check refuses a field a schedule does not have (a misspelt field is a 422
// naming it, not a setting silently left at its default) and reads
// playbook_version null as the latest.
func (r *ScheduleRequest) Check(f jsonx.Fields) error {
	names := jsonx.Names(r)
	for _, k := range slices.Sorted(maps.Keys(f.M)) {
		if !slices.Contains(names, k) {
			return jsonx.Refuse(f.Name(k), "unknown field; a schedule has %s", strings.Join(names, ", "))
		}
	}
	if v, present := f.M["playbook_version"]; present && v == nil {
		r.PlaybookVersion = new(0)
	}
	return nil
}

// BackfillRequest is the body of POST /api/schedules/{id}/backfill.
type BackfillRequest struct {
	From Time `json:"from" required:"true" doc:"RFC 3339 time: the range's start (inclusive)"`
	To   Time `json:"to" required:"true" doc:"RFC 3339 time, not in the future: the range's end (inclusive)"`
}

// TriggerRequest is the body of POST /api/schedules/{id}/trigger: none is
// needed; a body must be an object.
type TriggerRequest struct{}

// ---- the keychain ----

// CredentialRequest is the body of POST /api/credentials (NoETL's
// CredentialCreateRequest); shared/credentials checks the name and the scope.
type CredentialRequest struct {
	Name        string `json:"name" openapi:"required" doc:"the alias playbooks name with auth: (letters, digits, _ . : @ -)"`
	Type        string `json:"type,omitempty" alias:"credential_type" doc:"postgres, bearer, api_key, basic, http, generic (default), …"`
	Data        Object `json:"data" openapi:"required" doc:"the secret fields, e.g. {\"user\", \"password\", \"host\", \"port\", \"database\"} or {\"token\"}"`
	Meta        Object `json:"meta,omitempty" doc:"metadata, not secret"`
	Tags        Tags   `json:"tags,omitempty" doc:"a list, or a comma-separated string"`
	Description string `json:"description,omitempty"`
	// Scope: nil keeps the stored scope; an empty one clears it.
	Scope *CredentialScope `json:"scope,omitempty" doc:"ours: where the credential may be used; absent or null keeps the stored scope, {} clears it (docs/security.md)"`
}

// RotateRequest is the body of POST /api/credentials/rotate.
type RotateRequest struct {
	NewKey bool `json:"new_key,omitempty" doc:"make a new current key first (a key file; with KMS, point the key id at a new key instead)"`
	Limit  int  `json:"limit,omitempty" min:"1" max:"1000" doc:"credentials to reseal in this call, {min}..{max} (default 100)"`
}

// ---- the kinds of field requests carry ----

// ReadJSON reads an id: a number or a numeric string (R-I2).
func (id *ID) ReadJSON(path string, v any) error {
	n, err := ids.Parse(v)
	if err != nil {
		return jsonx.Refuse(path, "%s", err.Error())
	}
	*id = ID(n)
	return nil
}

// Version is a playbook version a request names: a number (or a numeric
// string) from 1, or "latest" (NoETL's clients send it), which is 0.
type Version int

// ReadJSON reads a version.
func (ver *Version) ReadJSON(path string, v any) error {
	if s, ok := v.(string); ok && strings.EqualFold(strings.TrimSpace(s), "latest") {
		*ver = 0
		return nil
	}
	n, err := jsonx.IntegerIn(v, 1, 1<<31-1)
	if err != nil {
		return jsonx.Refuse(path, "%s", err.Error())
	}
	*ver = Version(n)
	return nil
}

// Scalar is a string, or an integer read as its decimal text: clients' event
// ids, NoETL's numeric command ids.
type Scalar string

// ReadJSON reads a string or an integer.
func (s *Scalar) ReadJSON(path string, v any) error {
	switch x := v.(type) {
	case string:
		*s = Scalar(x)
	case int64:
		*s = Scalar(strconv.FormatInt(x, 10))
	default:
		return jsonx.Refuse(path, "expected string or integer, got %s", jsonx.TypeName(v))
	}
	return nil
}

// ClientTime is a producer's timestamp, kept as sent: RFC 3339, or the
// zone-less ISO form NoETL's Python workers write (ParseTime).
type ClientTime string

// ReadJSON reads a timestamp ParseTime takes.
func (t *ClientTime) ReadJSON(path string, v any) error {
	s, ok := v.(string)
	if !ok {
		return jsonx.Refuse(path, "expected string, got %s", jsonx.TypeName(v))
	}
	if _, err := ParseTime(s); err != nil {
		return jsonx.Refuse(path, "expected a timestamp such as 2024-05-01T12:00:00Z (a zone-less one is read as UTC), got %q", jsonx.Cut(s, 40))
	}
	*t = ClientTime(s)
	return nil
}

// ReadJSON reads a required RFC 3339 time.
func (t *Time) ReadJSON(path string, v any) error {
	s, ok := v.(string)
	switch {
	case !ok:
		return jsonx.Refuse(path, "expected string, got %s", jsonx.TypeName(v))
	case s == "":
		return jsonx.Refuse(path, "must not be empty")
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return jsonx.Refuse(path, "expected an RFC 3339 time such as 2024-05-01T00:00:00Z, got %q", jsonx.Cut(s, 40))
	}
	t.Time = at
	return nil
}

// Tags are a credential's tags: a list of strings, or NoETL's comma-separated
// string.
type Tags []string

// ReadJSON reads a list or a comma-separated string.
func (t *Tags) ReadJSON(path string, v any) error {
	out := Tags{}
	switch x := v.(type) {
	case string:
		for _, s := range strings.Split(x, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	case []any:
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				return jsonx.Refuse(path+"["+strconv.Itoa(i)+"]", "expected string, got %s", jsonx.TypeName(e))
			}
			out = append(out, s)
		}
	default:
		return jsonx.Refuse(path, "expected a list of strings or a comma-separated string, got %s", jsonx.TypeName(v))
	}
	*t = out
	return nil
}

// ---- what-if ----

// MaxWhatIf bounds the recorded executions one what-if replays (and a
// select's limit); DefaultWhatIf is a select's limit when none is given.
const (
	MaxWhatIf     = 1000
	DefaultWhatIf = 100
)

// WhatIfRequest is the body of POST /api/whatif: the new version (a
// registered path and version, or content) and the recorded executions (ids,
// or a select).
type WhatIfRequest struct {
	Path       string        `json:"path,omitempty" doc:"the new version's playbook path; with version, or alone for its latest"`
	Version    Version       `json:"version,omitempty" doc:"a registered version of path, or \"latest\" (default)"`
	Content    string        `json:"content,omitempty" doc:"the new version as YAML (or base64 YAML), not registered; instead of path and version"`
	Executions []ID          `json:"executions,omitempty" max:"1000" items:"executions in one what-if" openapi:"ids" doc:"the recorded executions, by id (at most {max}); or select"`
	Select     *WhatIfSelect `json:"select,omitempty" doc:"which recorded executions, newest first; or executions"`
}

// WhatIfSelect picks recorded executions, newest first.
type WhatIfSelect struct {
	Path   string `json:"path,omitempty" doc:"their playbook path; default the new version's (another path is 422)"`
	Status string `json:"status,omitempty" enum:"RUNNING,COMPLETED,FAILED,CANCELLED" doc:"only executions with this status"`
	Since  string `json:"since,omitempty" doc:"started at or after: RFC 3339, or a duration before now (24h, 90m)"`
	Until  string `json:"until,omitempty" doc:"started before: RFC 3339, or a duration before now"`
	Limit  int    `json:"limit,omitempty" min:"1" max:"1000" doc:"at most this many ({min} to {max}; default 100)"`
}

// Check: the new version is path (with version) or content, not both; the
// executions are ids or a select, not both.
func (r *WhatIfRequest) Check(f jsonx.Fields) error {
	switch {
	case r.Content != "" && r.Path != "":
		return jsonx.Refuse(f.Name("content"), "give the new version as path (and version) or as content, not both")
	case r.Content == "" && r.Path == "":
		return jsonx.Refuse(f.Name("path"), "required: the new version's path (and version), or its YAML as content")
	case r.Content != "" && r.Version != 0:
		return jsonx.Refuse(f.Name("version"), "a version names a registered playbook: give path with it, or content alone")
	case len(r.Executions) > 0 && r.Select != nil:
		return jsonx.Refuse(f.Name("select"), "give executions (ids) or select, not both")
	case len(r.Executions) == 0 && r.Select == nil:
		return jsonx.Refuse(f.Name("executions"), "required: the recorded executions' ids, or select {path, status, since, until, limit}")
	}
	if s := r.Select; s != nil && s.Status != "" {
		s.Status = strings.ToUpper(s.Status)
		if !slices.Contains([]string{lifecycle.ExecutionRunning, lifecycle.ExecutionCompleted, lifecycle.ExecutionFailed, lifecycle.ExecutionCancelled}, s.Status) {
			return jsonx.Refuse(f.Name("select")+".status", "expected %s, %s, %s or %s, got %q", lifecycle.ExecutionRunning,
				lifecycle.ExecutionCompleted, lifecycle.ExecutionFailed, lifecycle.ExecutionCancelled, jsonx.Cut(s.Status, 40))
		}
	}
	return nil
}

// SinceAgo reads a select's since or until: an RFC 3339 time, or a duration
// before now ("24h"). field names it in the refusal.
func SinceAgo(field, s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, jsonx.Refuse(field, "a duration before now must not be negative, got %q", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, jsonx.Refuse(field, "expected an RFC 3339 time (2026-01-02T15:04:05Z) or a duration before now (24h), got %q", jsonx.Cut(s, 60))
	}
	return t, nil
}

// SQLRequest is the body of POST /api/postgres/execute (NoETL's; the admin
// scope, read-only: docs/security.md).
type SQLRequest struct {
	Query       string `json:"query,omitempty" doc:"one statement that reads (SELECT, WITH, TABLE, VALUES, SHOW, EXPLAIN); run read-only and rolled back"`
	QueryBase64 string `json:"query_base64,omitempty" doc:"the query, base64-encoded (NoETL's)"`
	Schema      string `json:"schema,omitempty" doc:"searched first (NoETL's CLI sends noetl; a schema that does not exist is skipped)"`
	Shard       *int   `json:"shard,omitempty" min:"0" max:"1023" doc:"run on this shard's database; absent: the cluster database"`
	Procedure   string `json:"procedure,omitempty" doc:"NoETL's; refused: procedures write"`
	Database    string `json:"database,omitempty" doc:"NoETL's; refused: name a shard instead"`
	Credential  string `json:"credential,omitempty" doc:"NoETL's; refused: the route reads this server's own databases only"`
	Connection  string `json:"connection_string,omitempty" doc:"NoETL's; refused: the route reads this server's own databases only"`
}

// DBInitRequest is the body of POST /api/db/init: none is needed (NoETL's CLI
// sends none); an empty object is accepted.
type DBInitRequest struct{}
