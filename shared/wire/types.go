package wire

// Field tags: `json` names the field (omitempty: optional in the OpenAPI
// document, otherwise required), `doc` describes it there, `enum` lists its
// values (comma-separated).

// ---- catalog and executions ----

// Registered answers POST /api/catalog/register.
type Registered struct {
	Status    string   `json:"status" enum:"success"`
	CatalogID ID       `json:"catalog_id"`
	Path      string   `json:"path"`
	Version   int      `json:"version"`
	Kind      string   `json:"kind"`
	Created   bool     `json:"created" doc:"false: the content equals the latest version, which is returned"`
	Warnings  []string `json:"warnings"`
}

// Started answers POST /api/execute.
type Started struct {
	ExecutionID       ID     `json:"execution_id"`
	Status            string `json:"status" enum:"started"`
	CommandsGenerated int    `json:"commands_generated"`
	Existing          bool   `json:"existing" doc:"true: the idempotency key's earlier execution"`
}

// ExecutionSummary is one row of GET /api/executions (NoETL's bare array).
type ExecutionSummary struct {
	ExecutionID       ID     `json:"execution_id"`
	CatalogID         ID     `json:"catalog_id"`
	Path              string `json:"path"`
	Version           int    `json:"version"`
	Status            string `json:"status"`
	StartedAt         Time   `json:"started_at"`
	CompletedAt       Time   `json:"completed_at"`
	ParentExecutionID OptID  `json:"parent_execution_id"`
	// Every event is numbered 1..last_seq (R-S4): the count without a scan.
	EventCount int64 `json:"event_count"`
	// NoETL's names for the times and what its GUI shows of them.
	StartTime WallTime `json:"start_time" doc:"started_at as NoETL's GUI shows it (UTC, 2006-01-02 15:04:05): its list prints the field as it comes"`
	EndTime   WallTime `json:"end_time" doc:"completed_at as start_time; null while running"`
	Elapsed
	Progress int `json:"progress" doc:"percent: 100 once ended; while running, the share of steps done where the answer knows them (the detail), else 0"`
	// A run a schedule started names the schedule and the due time it ran for.
	ScheduleID  OptID `json:"schedule_id" doc:"the schedule that started the execution; null: none"`
	ScheduledAt Time  `json:"scheduled_at" doc:"the due time the schedule started it for; null: not a scheduled run"`
}

// Elapsed is how long an execution ran, as NoETL's lists and status
// answer it.
type Elapsed struct {
	DurationSeconds float64 `json:"duration_seconds" doc:"from start to end, or to now while running, to the millisecond"`
	DurationHuman   string  `json:"duration_human" doc:"duration_seconds as NoETL writes it: 1h 2m 3s"`
}

// Execution answers GET /api/executions/{id}.
type Execution struct {
	ExecutionSummary
	Workload Object          `json:"workload"`
	Steps    map[string]Step `json:"steps"`
	Context  Object          `json:"context" doc:"the durable set values"`
	Result   Value           `json:"result"`
	Error    OptString       `json:"error"`
	Events   []Event         `json:"events" doc:"one page of the log, newest first (page, page_size, since_event_id); the whole log, oldest first, is GET /api/executions/{id}/events"`
	// Pagination describes Events' page (NoETL's).
	Pagination EventsPagination `json:"pagination"`
}

// EventsPagination is the page of events an Execution carries.
type EventsPagination struct {
	Page        int   `json:"page"`
	PageSize    int   `json:"page_size"`
	TotalEvents int64 `json:"total_events" doc:"events of the execution (after since_event_id, when given)"`
	TotalPages  int64 `json:"total_pages"`
	HasNext     bool  `json:"has_next" doc:"older events are on the next page"`
	HasPrev     bool  `json:"has_prev"`
}

// Step is one step of an Execution.
type Step struct {
	Status      string    `json:"status"`
	Result      Value     `json:"result"`
	Attempts    int       `json:"attempts"`
	Visits      int       `json:"visits"`
	StartedAt   Time      `json:"started_at"`
	CompletedAt Time      `json:"completed_at"`
	Error       OptString `json:"error"`
}

// Event is one event of an execution's log, as users read it.
type Event struct {
	EventID       ID        `json:"event_id"`
	ExecutionID   ID        `json:"execution_id"`
	Seq           int64     `json:"seq"`
	EventType     string    `json:"event_type"`
	NodeName      OptString `json:"node_name"`
	NodeType      OptString `json:"node_type"`
	Status        OptString `json:"status"`
	Context       OptObject `json:"context"`
	Meta          OptObject `json:"meta"`
	Result        OptObject `json:"result"`
	Error         OptString `json:"error"`
	WorkerID      OptString `json:"worker_id"`
	CommandID     OptString `json:"command_id"`
	ParentEventID OptID     `json:"parent_event_id"`
	ClientEventID OptString `json:"client_event_id"`
	Ignored       bool      `json:"ignored"`
	CreatedAt     Time      `json:"created_at"`
	Timestamp     Time      `json:"timestamp" doc:"created_at, NoETL's name"`
	Duration      *int64    `json:"duration" doc:"milliseconds, as NoETL stores and its GUI reads them: a step.exit's since its step.enter, a command's end (command.completed, command.failed, call.done, call.error) since it was claimed or started, a playbook's end since the execution started; null for other events and when the start is more than a page back"`
}

// EventPage answers GET /api/executions/{id}/events.
type EventPage struct {
	Events       []Event `json:"events"`
	NextAfterSeq *int64  `json:"next_after_seq" doc:"null on the last page"`
}

// Status answers GET /api/executions/{id}/status (events.md §6): ours, and
// the fields NoETL's Python server answers and its CLI reads
// (docs/noetl-compat.md, "NoETL's CLI").
type Status struct {
	ExecutionID ID        `json:"execution_id"`
	Status      string    `json:"status"`
	CurrentStep OptString `json:"current_step"`
	Progress    Progress  `json:"progress"`
	IsCancelled bool      `json:"is_cancelled"`

	Completed          bool      `json:"completed" doc:"NoETL's: the execution ended (COMPLETED, FAILED or CANCELLED)"`
	Failed             bool      `json:"failed" doc:"NoETL's: it ended FAILED or CANCELLED (with completed true, so NoETL's CLI prints FAILED)"`
	CompletionInferred bool      `json:"completion_inferred" doc:"NoETL's; always false: the end is the execution's own terminal event, never guessed"`
	CompletedSteps     []string  `json:"completed_steps" doc:"NoETL's: the completed steps' names, in the order they ended"`
	Error              OptString `json:"error" doc:"why it failed or was cancelled; null otherwise"`
	StartTime          Time      `json:"start_time"`
	EndTime            Time      `json:"end_time" doc:"null while running"`
	Elapsed
}

// Progress counts an execution's steps by state.
type Progress struct {
	TotalSteps     int `json:"total_steps"`
	CompletedSteps int `json:"completed_steps"`
	RunningSteps   int `json:"running_steps"`
	FailedSteps    int `json:"failed_steps"`
	SkippedSteps   int `json:"skipped_steps"`
}

// CancellationCheck answers GET /api/executions/{id}/cancellation-check.
type CancellationCheck struct {
	ExecutionID ID     `json:"execution_id"`
	IsCancelled bool   `json:"is_cancelled"`
	Status      string `json:"status"`
}

// CancelAnswer answers POST /api/executions/{id}/cancel and …/stop, in NoETL's
// shape: an execution that already ended is answered 200, as NoETL does, with
// status already_completed and nothing cancelled.
type CancelAnswer struct {
	ExecutionID         ID        `json:"execution_id"`
	Status              string    `json:"status" enum:"CANCELLED,already_completed"`
	CancelledExecutions []ID      `json:"cancelled_executions" doc:"the executions this request ended: the one asked for, then its children unless cascade was false"`
	Message             string    `json:"message"`
	Already             OptString `json:"already" doc:"how the execution had already ended (COMPLETED, FAILED or CANCELLED); null when this request ended it"`
}

// CleanupAnswer answers POST /api/executions/cleanup, in NoETL's shape.
type CleanupAnswer struct {
	CancelledCount int    `json:"cancelled_count" doc:"how many executions were cancelled, or would be (dry run)"`
	ExecutionIDs   []ID   `json:"execution_ids" doc:"those executions, ids as strings (as NoETL's server sends them)"`
	Message        string `json:"message"`
	DryRun         bool   `json:"dry_run"`
}

// Ended answers POST /api/executions/{id}/finalize.
type Ended struct {
	ExecutionID ID     `json:"execution_id"`
	Status      string `json:"status"`
	Message     string `json:"message"`
}

// Redriven answers POST /api/executions/{id}/redrive: the execution runs
// again in place.
type Redriven struct {
	ExecutionID     ID             `json:"execution_id"`
	Status          string         `json:"status" doc:"RUNNING"`
	Path            string         `json:"path"`
	Version         int            `json:"version" doc:"the version it continues under"`
	PreviousVersion int            `json:"previous_version"`
	PreviousStatus  string         `json:"previous_status" enum:"FAILED,CANCELLED"`
	Commands        int            `json:"commands" doc:"commands the redrive issued at once"`
	KeptIterations  map[string]int `json:"kept_iterations,omitempty" doc:"per loop step resumed, the completed iterations kept (not run again)"`
}

// RedriveBatch answers POST /api/executions/redrive: one entry per distinct
// execution, in the order given.
type RedriveBatch struct {
	Redriven   int           `json:"redriven"`
	Refused    int           `json:"refused"`
	Executions []RedriveItem `json:"executions"`
}

// RedriveItem is one execution's answer in a bulk redrive.
type RedriveItem struct {
	ExecutionID ID        `json:"execution_id"`
	Outcome     string    `json:"outcome" enum:"redriven,refused"`
	Code        int       `json:"code,omitempty" doc:"when refused: the HTTP status a single redrive would answer (409: running, completed or a dropped step; 404; 422)"`
	Error       string    `json:"error,omitempty"`
	Redriven    *Redriven `json:"redriven,omitempty"`
}

// Health answers GET /api/health.
type Health struct {
	Status   Value  `json:"status" doc:"\"ok\", or 503 (the HTTP status) when a dependency is down"`
	Database string `json:"database" enum:"ok,down,disabled"`
	NATS     string `json:"nats" enum:"ok,down,disabled"`
	Version  string `json:"version"`
	Error    string `json:"error,omitempty" doc:"which dependencies are down"`
	// Function names the Lambda function answering a direct-invoke probe
	// (not sent over HTTP).
	Function string `json:"function,omitempty" doc:"the Lambda function, in a direct-invoke probe's answer"`
}

// ---- the worker protocol ----

// Command is a command body: the claim's answer (NoETL's shape), GET
// /api/commands/{event_id}, and the commands a report hands back. Its
// event_id and execution_id are JSON integers (NumID).
type Command struct {
	Status         string    `json:"status" doc:"ok in a claim's answer; the command's own status (PENDING, CLAIMED, …) when only read"`
	EventID        NumID     `json:"event_id"`
	ExecutionID    NumID     `json:"execution_id"`
	NodeID         string    `json:"node_id"`
	NodeName       string    `json:"node_name"`
	Action         string    `json:"action"`
	Context        Object    `json:"context"`
	Meta           Object    `json:"meta"`
	CommandID      string    `json:"command_id"`
	Attempt        int       `json:"attempt"`
	LeaseExpiresAt Time      `json:"lease_expires_at"`
	WorkerID       OptString `json:"worker_id"`
}

// Lease answers a heartbeat.
type Lease struct {
	LeaseExpiresAt Time `json:"lease_expires_at"`
}

// Ingested answers POST /api/events.
type Ingested struct {
	Status            string `json:"status" enum:"ok"`
	EventID           ID     `json:"event_id,omitempty" doc:"the stored event; absent for a command.heartbeat, which writes none (R-L1)"`
	CommandsGenerated int    `json:"commands_generated"`
	Duplicate         bool   `json:"duplicate"`
	// Ignored says why the event was stored flagged ignored and not folded
	// (R-L8, R-R10), or why a heartbeat extended no lease.
	Ignored        string `json:"ignored,omitempty" doc:"why the event was stored flagged ignored and not folded (a fenced report: another holder, a lost lease, an ended execution), or why a heartbeat extended no lease"`
	LeaseExpiresAt *Time  `json:"lease_expires_at,omitempty" doc:"a command.heartbeat's new lease end"`
}

// IngestedBatch answers POST /api/events/batch.
type IngestedBatch struct {
	Status            string `json:"status" enum:"ok"`
	EventIDs          []ID   `json:"event_ids" doc:"in the order posted; \"0\" for a command.heartbeat, which writes no event"`
	CommandsGenerated int    `json:"commands_generated"`
	Ignored           string `json:"ignored,omitempty" doc:"why events were stored flagged ignored and not folded (the first reason)"`
	IgnoredEventIDs   []ID   `json:"ignored_event_ids,omitempty" doc:"the events stored ignored"`
}

// Reported answers a Report: one outcome per event and per claim, in order,
// and the commands handed to the worker, already claimed and started for it
// (the claims it got, and those the events issued).
type Reported struct {
	Status   string         `json:"status" enum:"ok"`
	Events   []EventOutcome `json:"events"`
	Claims   []ClaimOutcome `json:"claims"`
	Commands []Command      `json:"commands"`
}

// EventOutcome is one event's outcome in a Reported: Status 200, or the
// error's status (404, 409, 422, 5xx) and message.
type EventOutcome struct {
	Status            int    `json:"status" doc:"this item's HTTP status"`
	EventID           ID     `json:"event_id,omitempty"`
	Error             string `json:"error,omitempty"`
	CommandsGenerated int    `json:"commands_generated,omitempty"`
	Duplicate         bool   `json:"duplicate,omitempty"`
}

// ClaimOutcome is one claim's outcome in a Reported: Status 200 (its command
// is in Commands), 404, 409, or 429 with RetryAfterSeconds (R-L7).
type ClaimOutcome struct {
	Status            int    `json:"status" doc:"this item's HTTP status"`
	EventID           ID     `json:"event_id,omitempty"`
	Error             string `json:"error,omitempty"`
	RetryAfterSeconds int    `json:"retry_after_seconds,omitempty"`
}

// ---- the catalog's lists and entries ----

// CatalogSummary is one entry of a catalog list.
type CatalogSummary struct {
	CatalogID ID     `json:"catalog_id"`
	Path      string `json:"path"`
	Version   int    `json:"version"`
	Kind      string `json:"kind"`
	CreatedAt Time   `json:"created_at"`
	// NoETL's: the playbook parsed (its GUI counts payload.workflow's steps
	// and shows payload.metadata.description) and the registration's meta.
	Payload OptObject   `json:"payload" doc:"the playbook's YAML as JSON (NoETL's payload); null if it no longer parses"`
	Meta    CatalogMeta `json:"meta"`
	// Credential is set in a list of kind Credential, whose entries are the
	// keychain's credentials: catalog_id is the credential's id, path its
	// name, version 1.
	Credential *Credential `json:"credential,omitempty" doc:"a list of resource_type Credential: the credential's metadata (never its data)"`
}

// CatalogMeta is NoETL's meta of a catalog entry.
type CatalogMeta struct {
	RegisteredAt Time `json:"registered_at" doc:"created_at"`
}

// CatalogPage answers GET /api/catalog and POST /api/catalog/list.
type CatalogPage struct {
	Entries    []CatalogSummary `json:"entries"`
	NextCursor OptString        `json:"next_cursor" doc:"null on the last page"`
}

// CatalogEntry is one version of a playbook with its content (NoETL's POST
// /api/catalog/resource answer).
type CatalogEntry struct {
	CatalogSummary
	Content string `json:"content"`
}

// CatalogDetail answers GET /api/catalog/{catalog_id}: the entry, the
// parser's problems (a registered playbook has warnings at most) and the step
// graph the dashboard draws.
type CatalogDetail struct {
	CatalogEntry
	Problems []Problem `json:"problems"`
	Graph    Object    `json:"graph,omitempty" doc:"the step graph the dashboard draws"`
}

// Problem is one diagnostic of a playbook, at its YAML path and line.
type Problem struct {
	Severity string `json:"severity"`
	Path     string `json:"path"`
	Line     int    `json:"line"`
	Message  string `json:"message"`
}

// ---- the worker registry (NoETL's pool routes) ----

// PoolRegistered answers a register or a pool heartbeat (NoETL's
// RuntimeRegistrationResponse and RuntimeHeartbeatResponse).
type PoolRegistered struct {
	Status    string `json:"status" enum:"ok,recreated" doc:"recreated: a heartbeat of an unknown worker carried its registration"`
	Name      string `json:"name"`
	RuntimeID ID     `json:"runtime_id"`
	Kind      string `json:"kind" enum:"worker_pool"`
	Runtime   string `json:"runtime"`
	// ExpiresAt and LeasesExtended are ours.
	ExpiresAt      Time  `json:"expires_at" doc:"when the worker expires without another register or heartbeat"`
	LeasesExtended int64 `json:"leases_extended" doc:"leases of commands the worker holds that this beat extended"`
}

// PoolDeregistered answers POST (or DELETE) /api/worker/pool/deregister.
type PoolDeregistered struct {
	Status string `json:"status" enum:"ok"`
	Name   string `json:"name"`
	Kind   string `json:"kind" enum:"worker_pool"`
	Found  bool   `json:"found" doc:"false: no worker was registered under that name"`
}

// WorkerPools answers GET /api/worker/pools: NoETL's RuntimeListResponse,
// its items with the registry's state and in-flight counts.
type WorkerPools struct {
	Items   []WorkerPool `json:"items"`
	Count   int          `json:"count"`
	Runtime OptString    `json:"runtime" doc:"the runtime filter"`
	Status  OptString    `json:"status" doc:"the state filter"`
}

// WorkerPool is one registered worker.
type WorkerPool struct {
	Name      string `json:"name" doc:"the worker's id: the one it claims commands with"`
	RuntimeID ID     `json:"runtime_id"`
	Runtime   Object `json:"runtime" doc:"NoETL's runtime object: {type, pid, hostname} and the worker's meta"`
	Status    string `json:"status" doc:"offline (deregistered), expired (silent past its TTL), or what it reported (ready, busy, …)"`
	Capacity  *int   `json:"capacity" doc:"commands it runs at once, as it said; null: not said"`
	Labels    Object `json:"labels"`
	Heartbeat Time   `json:"heartbeat" doc:"its last register or heartbeat"`
	CreatedAt Time   `json:"created_at"`
	UpdatedAt Time   `json:"updated_at"`
	// The rest are ours.
	Pool      string    `json:"pool"`
	Alive     bool      `json:"alive"`
	InFlight  int       `json:"in_flight" doc:"commands it holds under a live lease"`
	ExpiresAt Time      `json:"expires_at"`
	Hostname  OptString `json:"hostname"`
	PID       *int64    `json:"pid"`
}

// PoolStatus answers GET /api/pool/status: NoETL's database pool telemetry
// (its Python worker throttles by it) for the answering process, and the
// registry's totals.
type PoolStatus struct {
	PoolMin         int     `json:"pool_min"`
	PoolMax         int     `json:"pool_max" doc:"connections the process may open, over every database"`
	PoolSize        int     `json:"pool_size" doc:"connections open"`
	PoolAvailable   int     `json:"pool_available" doc:"connections it can still hand out"`
	RequestsWaiting int     `json:"requests_waiting"`
	Utilization     float64 `json:"utilization" doc:"connections in use / pool_max"`
	SlotsAvailable  int     `json:"slots_available"`
	Status          string  `json:"status" enum:"ok"`
	Workers         Workers `json:"workers" doc:"the worker registry's totals (ours)"`
}

// Workers are the registry's totals.
type Workers struct {
	Alive    int `json:"alive"`
	Expired  int `json:"expired"`
	Offline  int `json:"offline"`
	Capacity int `json:"capacity" doc:"what the live workers declared"`
	InFlight int `json:"in_flight" doc:"commands held under a live lease"`
}

// PlaybookContent answers GET /api/catalog/playbook/content.
type PlaybookContent struct {
	CatalogID ID     `json:"catalog_id"`
	Path      string `json:"path"`
	Version   int    `json:"version"`
	Content   string `json:"content"`
}

// Validation answers POST /api/catalog/playbooks/validate: what register
// would say of the content, without registering it.
type Validation struct {
	Valid    bool      `json:"valid" doc:"no errors: register would accept it"`
	Errors   []string  `json:"errors" doc:"each error as path (line n): message"`
	Warnings []string  `json:"warnings"`
	Problems []Problem `json:"problems" doc:"errors and warnings, structured"`
}

// UISchema answers GET /api/catalog/{path}/ui_schema: the form of a
// playbook's workload, inferred from the values it declares (NoETL's shape).
type UISchema struct {
	Path                string    `json:"path"`
	Version             int       `json:"version"`
	Kind                string    `json:"kind" enum:"playbook"`
	Title               OptString `json:"title" doc:"metadata.name"`
	DescriptionMarkdown OptString `json:"description_markdown" doc:"metadata.description"`
	ExposedInUI         bool      `json:"exposed_in_ui" doc:"metadata.exposed_in_ui"`
	Fields              []UIField `json:"fields" doc:"one per top-level workload key, in the order written"`
	GeneratedAt         Time      `json:"generated_at"`
}

// UIField is one field of a UISchema.
type UIField struct {
	Name           string     `json:"name"`
	Kind           string     `json:"kind" enum:"string,integer,number,boolean,object,array,null,enum"`
	Default        Value      `json:"default" doc:"the value the playbook declares"`
	Description    OptString  `json:"description" doc:"from a # ui:description=… comment"`
	Secret         bool       `json:"secret" doc:"# ui:secret, or a key the server masks (password, token, …)"`
	CredentialGlob OptString  `json:"credential_glob" doc:"# ui:credential=<glob>"`
	Options        *[]Value   `json:"options" doc:"kind enum: # ui:enum=[a, b]"`
	Children       *[]UIField `json:"children" doc:"kind object: its keys, as fields"`
}

// ---- schedules ----

// Schedule answers the schedule routes (NoETL's noetl.schedule field names
// where it has them).
type Schedule struct {
	ScheduleID      ID        `json:"schedule_id"`
	PlaybookPath    string    `json:"playbook_path"`
	PlaybookVersion *int      `json:"playbook_version" doc:"null: the latest version when each run starts"`
	Cron            OptString `json:"cron" doc:"5 fields, or 6 with seconds first; null: an interval schedule"`
	IntervalSeconds *int64    `json:"interval_seconds" doc:"null: a cron schedule"`
	Timezone        string    `json:"timezone" doc:"IANA name the cron is read in"`
	Enabled         bool      `json:"enabled" doc:"false: paused"`
	InputPayload    Object    `json:"input_payload" doc:"each run's workload overrides"`
	Overlap         string    `json:"overlap" enum:"skip,buffer_one,allow"`
	CatchupSeconds  int64     `json:"catchup_seconds" doc:"due times older than this when the schedule can fire are skipped and recorded"`
	JitterSeconds   int64     `json:"jitter_seconds"`
	Meta            Object    `json:"meta"`
	NextRunAt       Time      `json:"next_run_at" doc:"the next due time; null while paused"`
	LastRunAt       Time      `json:"last_run_at" doc:"when the last run started"`
	LastScheduledAt Time      `json:"last_scheduled_at" doc:"the due time of the last run"`
	LastExecutionID OptID     `json:"last_execution_id"`
	LastStatus      OptString `json:"last_status" doc:"the last run's status"`
	BufferedAt      Time      `json:"buffered_at" doc:"buffer_one: the due time waiting for the running run"`
	Backfill        *Backfill `json:"backfill" doc:"what is left of a backfill; null: none"`
	CreatedAt       Time      `json:"created_at"`
	UpdatedAt       Time      `json:"updated_at"`
}

// Backfill is what is left of a schedule's backfill.
type Backfill struct {
	Next Time `json:"next" doc:"the next due time to run"`
	To   Time `json:"to" doc:"the last due time of the range"`
}

// SchedulePage answers GET /api/schedules.
type SchedulePage struct {
	Schedules  []Schedule `json:"schedules"`
	NextCursor OptString  `json:"next_cursor" doc:"null on the last page"`
}

// ScheduleRun is one row of a schedule's log: a run, or due times skipped.
type ScheduleRun struct {
	ScheduledAt Time      `json:"scheduled_at" doc:"the due time (the first of a skipped range)"`
	Through     Time      `json:"through" doc:"the last due time of a skipped range (scheduled_at for one)"`
	Count       int       `json:"count" doc:"how many due times the row covers"`
	Origin      string    `json:"origin" enum:"schedule,buffered,backfill,trigger"`
	Outcome     string    `json:"outcome" enum:"started,skipped,failed"`
	ExecutionID OptID     `json:"execution_id"`
	Status      OptString `json:"status" doc:"the execution's status"`
	Reason      OptString `json:"reason" doc:"why the due times were skipped or the run could not start"`
	RecordedAt  Time      `json:"recorded_at"`
}

// ScheduleRunPage answers GET /api/schedules/{id}/runs.
type ScheduleRunPage struct {
	Runs       []ScheduleRun `json:"runs" doc:"newest due time first"`
	NextCursor OptString     `json:"next_cursor" doc:"null on the last page"`
}

// Triggered answers POST /api/schedules/{id}/trigger.
type Triggered struct {
	ScheduleID  ID        `json:"schedule_id"`
	ScheduledAt Time      `json:"scheduled_at" doc:"the run's due time: now"`
	Outcome     string    `json:"outcome" enum:"started,buffered,skipped,failed" doc:"the overlap policy decides"`
	ExecutionID OptID     `json:"execution_id"`
	Reason      OptString `json:"reason"`
}

// Backfilled answers POST /api/schedules/{id}/backfill.
type Backfilled struct {
	ScheduleID ID   `json:"schedule_id"`
	DueTimes   int  `json:"due_times" doc:"how many due times the range holds; each runs once, in order"`
	From       Time `json:"from" doc:"the first due time"`
	To         Time `json:"to" doc:"the last due time"`
}

// ScheduleDeleted answers DELETE /api/schedules/{id}.
type ScheduleDeleted struct {
	ScheduleID ID   `json:"schedule_id"`
	Deleted    bool `json:"deleted"`
}

// Doctor answers GET /api/doctor: the executions that break the liveness
// invariant (controlplane.Doctor), each with why.
type Doctor struct {
	Stalled        []Stalled `json:"stalled" doc:"RUNNING or FAILING executions that nothing will move, or whose commands wait on a drain that is not running"`
	OverdueSeconds float64   `json:"overdue_seconds" doc:"how long a command may wait on the drain before its execution is named"`
}

// Stalled is one execution GET /api/doctor names.
type Stalled struct {
	ExecutionID     ID     `json:"execution_id"`
	Path            string `json:"path"`
	Status          string `json:"status" enum:"RUNNING,FAILING"`
	UpdatedAt       Time   `json:"updated_at" doc:"when its row last changed"`
	Active          int    `json:"active" doc:"its commands pending or held"`
	Stale           int    `json:"stale" doc:"of which waited on the drain past overdue_seconds"`
	RunningChildren int    `json:"running_children"`
	Reason          string `json:"reason"`
}

// ---- the internal routes (NoETL's outbox publisher, external events) ----

// OutboxClaimed answers POST /api/internal/outbox/claim.
type OutboxClaimed struct {
	Rows    []OutboxRow `json:"rows"`
	Claimed int         `json:"claimed"`
}

// OutboxRow is one claimed outbox row, to publish on Subject with MsgID.
type OutboxRow struct {
	OutboxID    ID     `json:"outbox_id"`
	EventID     ID     `json:"event_id"`
	ExecutionID ID     `json:"execution_id"`
	Subject     string `json:"subject"`
	MsgID       string `json:"msg_id"`
	Payload     Value  `json:"payload"`
	Attempts    int    `json:"attempts"`
	// NoETL's publisher decodes payload by codec; ours are plain JSON.
	PayloadCodec string `json:"payload_codec" enum:"json"`
}

// OutboxMarked answers POST /api/internal/outbox/mark-published: marked is
// NoETL's name, updated this project's earlier one.
type OutboxMarked struct {
	Marked  int64 `json:"marked"`
	Updated int64 `json:"updated"`
}

// OutboxFailed answers POST /api/internal/outbox/mark-failed.
type OutboxFailed struct {
	Marked        bool  `json:"marked"`
	AvailableAtIn int64 `json:"available_at_in" doc:"seconds until the retry"`
}

// OutboxPending answers GET /api/internal/outbox/pending-count.
type OutboxPending struct {
	Pending int64 `json:"pending"`
}

// Projected answers POST /api/internal/events/project.
type Projected struct {
	Projected  int `json:"projected"`
	Duplicates int `json:"duplicates"`
	Skipped    int `json:"skipped"`
}

// ---- what-if ----

// What-if outcomes of one recorded execution under the new version.
const (
	OutcomeSame          = "same"
	OutcomeWouldComplete = "would_complete"
	OutcomeWouldFail     = "would_fail"
	OutcomeNeedsLive     = "needs_live"
)

// What-if verdicts of one step.
const (
	VerdictReplayed = "replayed"
	VerdictChanged  = "changed"
	VerdictNoRecord = "no_record"
	VerdictEngine   = "engine"
)

// WhatIf answers POST /api/whatif: what the new version would have done on
// each recorded execution, answered from the recorded results (no tool ran,
// nothing was written).
type WhatIf struct {
	Path       string            `json:"path" doc:"the playbook path"`
	Version    int               `json:"version" doc:"the new version; 0: content not registered"`
	Summary    WhatIfSummary     `json:"summary"`
	Executions []WhatIfExecution `json:"executions" doc:"in the order asked (a select: newest first)"`
}

// WhatIfSummary counts the executions by outcome.
type WhatIfSummary struct {
	Same          int `json:"same" doc:"the recorded path, results and final status"`
	WouldComplete int `json:"would_complete"`
	WouldFail     int `json:"would_fail"`
	NeedsLive     int `json:"needs_live" doc:"a command with no matching record: only a live run can tell"`
}

// WhatIfExecution is one recorded execution under the new version.
type WhatIfExecution struct {
	ExecutionID     ID           `json:"execution_id"`
	RecordedVersion int          `json:"recorded_version"`
	RecordedStatus  string       `json:"recorded_status"`
	Outcome         string       `json:"outcome" enum:"same,would_complete,would_fail,needs_live"`
	DivergesAt      OptString    `json:"diverges_at" doc:"the first step whose outcome differs from the record; null: none"`
	NeedsLiveAt     OptString    `json:"needs_live_at" doc:"the step whose command has no matching record; null: none"`
	Error           string       `json:"error,omitempty" doc:"would_fail: the execution's error"`
	Steps           []WhatIfStep `json:"steps" doc:"the steps the new version reached, in order, then recorded steps it would not reach"`
	Result          any          `json:"result,omitempty" doc:"would_complete: the final result it would have"`
}

// WhatIfStep is one step's verdict.
type WhatIfStep struct {
	Step    string `json:"step"`
	Verdict string `json:"verdict" enum:"replayed,changed,no_record,engine" doc:"replayed: answered from the recorded result of the same command; changed: its outcome differs from the record; no_record: a command with no matching record; engine: no side effect, computed"`
	Diff    string `json:"diff,omitempty" doc:"what differs from the record"`
}

// WouldComplete lists the executions the what-if predicts would now
// complete (what a bulk redrive takes).
func (w *WhatIf) WouldComplete() []int64 {
	var ids []int64
	for _, e := range w.Executions {
		if e.Outcome == OutcomeWouldComplete {
			ids = append(ids, int64(e.ExecutionID))
		}
	}
	return ids
}

// ---- the database routes (NoETL's CLI: db validate, db init, query) ----

// SchemaReport answers GET /api/db/validate and POST /api/db/init: NoETL's
// fields over every database of the deployment, and each database's state.
type SchemaReport struct {
	Status    string           `json:"status" enum:"ok,error"`
	Valid     bool             `json:"valid" doc:"every database holds every migration this server carries, and every table they create"`
	Message   string           `json:"message"`
	Tables    []string         `json:"tables" doc:"the tables the migrations create, found (over every database)"`
	Missing   []string         `json:"missing" doc:"those not found"`
	AllTables []string         `json:"all_tables" doc:"every base table found"`
	Databases []DatabaseSchema `json:"databases"`
}

// DatabaseSchema is one database's schema state.
type DatabaseSchema struct {
	Name    string   `json:"name" doc:"cluster, or shard N"`
	Set     string   `json:"set" enum:"cluster,shard" doc:"the migration set it takes"`
	Applied int      `json:"applied" doc:"the newest migration version applied"`
	Wanted  int      `json:"wanted" doc:"the newest this server carries"`
	Valid   bool     `json:"valid"`
	Missing []string `json:"missing" doc:"tables its migrations create that are not found"`
}

// SQLAnswer answers POST /api/postgres/execute: NoETL's status and result,
// the rows as arrays (what NoETL's CLI's table prints) beside the columns.
type SQLAnswer struct {
	Status    string    `json:"status" enum:"ok,error"`
	Columns   []string  `json:"columns"`
	Result    Value     `json:"result" doc:"the rows, each an array of values in the columns' order; null on error"`
	Truncated bool      `json:"truncated" doc:"rows past the limit were left out"`
	Error     OptString `json:"error" doc:"Postgres' refusal (status error); null otherwise"`
}
