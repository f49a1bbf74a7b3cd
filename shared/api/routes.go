package api

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/noetl-go/noetl/shared/config"
	"github.com/noetl-go/noetl/shared/wire"
)

// Function names: one Lambda function each (api.md §2; R-A1: exactly one
// function per route).
const (
	FnCatalog = "catalog"
	FnExecute = "execute"
	FnIngest  = "ingest"
	FnClaim   = "claim"
	FnStatus  = "status"
	FnReplay  = "replay"
	FnOutbox  = "outbox"
	// FnSchedules serves the schedule routes and fires schedules when the
	// scheduler (EventBridge Scheduler in AWS, a loop locally) invokes it.
	FnSchedules = "schedules"
	// FnKeychain serves the credential routes: the only function that may
	// use the keychain's KMS key, and the only binary linking a KMS client.
	FnKeychain = "keychain"
)

// Functions lists the Lambda functions in a stable order.
func Functions() []string {
	return []string{FnCatalog, FnExecute, FnIngest, FnClaim, FnStatus, FnReplay, FnOutbox, FnSchedules, FnKeychain}
}

// Route is one route of the HTTP API, declared once in Routes: the router,
// the dispatch (handle), the OpenAPI document, routes.json (which the CDK
// stack reads) and template.yaml's HttpApi events (SAMTemplate) all derive
// from it; `make generate` rewrites the checked-in files.
type Route struct {
	Method string
	// Path in API Gateway syntax: /api/commands/{event_id}/claim.
	Path     string
	Function string
	// Scope is the token scope the route needs (R-A3); 0 means open (health).
	Scope config.Scope
	// Tokenless: a worker route a request without a token from a tokenless
	// worker network may reach (NOETL_TOKENLESS_WORKER_NETWORKS): what a
	// worker needs for its own commands (claim, events, heartbeats, its
	// registration, the pool status, the cancellation check), never
	// credentials, variables or staged results (docs/security.md).
	Tokenless bool

	// ID is the OpenAPI operationId (what a generated client names the call).
	ID string
	// Summary is one line for the OpenAPI document.
	Summary string
	// Query lists the query parameters the handler reads; getParams and
	// handleParams derive them from its parameter type.
	Query []Param
	// Body is the JSON request body; nil: the route reads none.
	Body *Shape
	// Reply is the 200 answer; nil with HTML set: not JSON.
	Reply *Shape
	// HTML marks the dashboard's routes, which answer files, not JSON.
	HTML bool
	// MaxBody raises the request body limit for this route above the API's
	// (a staged result); 0: the API's limit.
	MaxBody int64

	// handler serves the route: handle or get over a method expression (the
	// table is built without an API). Body, Reply and Query default to its
	// shapes.
	handler handler
}

// handler is a route's handler with the shapes of the request it reads and
// the answer it writes.
type handler struct {
	run   func(a *API, ctx context.Context, c *call) (any, error)
	body  func() *Shape // nil: the route reads no body
	reply func() *Shape // nil: the route declares its answer (Reply)
	// query lists its parameter type's query parameters; none: the route
	// declares its query (Query), if any.
	query func() []Param
	// params are the fields of its parameter type (readParams).
	params []paramField
}

// handleParams is the one skeleton of a route that reads a body: the body
// decoded into Req by decodeBody's rules and jsonx.Read (a refusal is the
// 422 naming the field, or 413 for a list over its limit), then the query
// and path parameters read into P by readParams (a refusal is the 422 naming
// the parameter), then h, whose answer is written as JSON. The OpenAPI
// document describes the body from Req (bodyOf), the query from P (paramsOf)
// and the answer from Resp (shapeOf).
func handleParams[P, Req, Resp any](h func(a *API, ctx context.Context, c *call, p P, req Req) (Resp, error)) handler {
	fields := paramFields[P]()
	return handler{body: bodyOf[Req], reply: replyOf[Resp], query: paramsOf[P], params: fields,
		run: func(a *API, ctx context.Context, c *call) (any, error) {
			var req Req
			if err := decodeInto(c.req.Body, &req); err != nil {
				return nil, err
			}
			p, err := readParams[P](fields, c)
			if err != nil {
				return nil, err
			}
			return h(a, ctx, c, p, req)
		}}
}

// handle is handleParams for a route that reads no parameters.
func handle[Req, Resp any](h func(a *API, ctx context.Context, c *call, req Req) (Resp, error)) handler {
	return handleParams(func(a *API, ctx context.Context, c *call, _ struct{}, req Req) (Resp, error) {
		return h(a, ctx, c, req)
	})
}

// getParams is handleParams for a route that reads no body (its input is
// the path and the query): P read by readParams, then h.
func getParams[P, Resp any](h func(a *API, ctx context.Context, c *call, p P) (Resp, error)) handler {
	fields := paramFields[P]()
	return handler{query: paramsOf[P], reply: replyOf[Resp], params: fields, run: func(a *API, ctx context.Context, c *call) (any, error) {
		p, err := readParams[P](fields, c)
		if err != nil {
			return nil, err
		}
		return h(a, ctx, c, p)
	}}
}

// get is getParams for a route that reads neither a body nor parameters
// (or reads its query its own way: replay's).
func get[Resp any](h func(a *API, ctx context.Context, c *call) (Resp, error)) handler {
	return getParams(func(a *API, ctx context.Context, c *call, _ struct{}) (Resp, error) {
		return h(a, ctx, c)
	})
}

// replyOf is the shape of an answer type; nil for any (the route declares it).
func replyOf[Resp any]() *Shape {
	if reflect.TypeFor[Resp]().Kind() == reflect.Interface {
		return nil
	}
	return shapeOf[Resp]()
}

// Key is the route's key as declared: "POST /api/commands/{event_id}/claim".
func (r Route) Key() string { return r.Method + " " + r.Path }

// A path segment {name+} is greedy: it takes one or more segments (a catalog
// path holds slashes), and literal segments may follow it
// (/api/catalog/{path+}/ui_schema). API Gateway allows a greedy variable only
// as a route's last segment, so there the route stops at it (GatewayPath) and
// the router here matches what follows.

// GatewayPath is the path API Gateway routes by: Path, cut after a greedy
// segment.
func (r Route) GatewayPath() string {
	segs := strings.Split(r.Path, "/")
	for i, s := range segs {
		if isGreedy(s) {
			return strings.Join(segs[:i+1], "/")
		}
	}
	return r.Path
}

// GatewayKey is API Gateway's route key: "GET /api/catalog/{path+}".
func (r Route) GatewayKey() string { return r.Method + " " + r.GatewayPath() }

// DocPath is the path the OpenAPI document describes: Path with a greedy
// segment written as a plain parameter ({path}).
func (r Route) DocPath() string { return strings.ReplaceAll(r.Path, "+}", "}") }

// GatewayParams are path parameters as API Gateway passes them: a greedy
// parameter's value runs to the end of the path.
func (r Route) GatewayParams(params map[string]string) map[string]string {
	gp := strings.TrimPrefix(r.GatewayPath(), "/")
	rest := strings.TrimPrefix(strings.TrimPrefix(r.Path, "/"), gp)
	if rest == "" {
		return params
	}
	out := maps.Clone(params)
	segs := strings.Split(gp, "/")
	name := paramName(segs[len(segs)-1])
	out[name] += rest
	return out
}

// Routes returns every route of the API (api.md §2 without /metrics, which
// the local server adds), sorted by API Gateway's path, then method: the one place a route
// is declared (docs/architecture.md, "Adding a route"). Each entry carries its
// handler and its request and response shapes.
func Routes() []Route {
	const (
		api      = config.ScopeAPI
		worker   = config.ScopeWorker
		internal = config.ScopeInternal
		admin    = config.ScopeAdmin
	)
	execID := Param{Name: "execution_id", Shape: id(), Required: true, Doc: "the execution"}
	rs := []Route{
		{Method: "GET", Path: "/api/health", Function: FnStatus, ID: "health",
			Summary: "Health of the API and its dependencies; 503 when one is down (R-A1: open)",
			Reply:   shapeOf[wire.Health](), handler: get((*API).health)},
		{Method: "GET", Path: "/api/openapi.json", Function: FnStatus, ID: "openapi",
			Summary: "This OpenAPI 3 document (open: it holds no data)",
			Reply:   object(), handler: get((*API).openapi)},
		// The dashboard's page and files (dashboard.go): open, they hold no data.
		{Method: "GET", Path: "/", Function: FnStatus, ID: "dashboard",
			Summary: "The web dashboard's page", HTML: true, handler: get((*API).dashboardIndex)},
		{Method: "GET", Path: "/ui/{asset}", Function: FnStatus, ID: "dashboardAsset",
			Summary: "One of the web dashboard's files", HTML: true, handler: getParams((*API).dashboardAsset)},

		{Method: "POST", Path: "/api/catalog/register", Function: FnCatalog, Scope: api, ID: "registerPlaybook",
			Summary: "Register a playbook (idempotent: the same content as the latest version is that version)",
			handler: handle((*API).register)},
		{Method: "GET", Path: "/api/catalog", Function: FnCatalog, Scope: api, ID: "listCatalog",
			Summary: "List catalog entries, newest first, paged by cursor",
			handler: getParams((*API).listCatalogQuery)},
		{Method: "GET", Path: "/api/catalog/{catalog_id}", Function: FnCatalog, Scope: api, ID: "getCatalogEntry",
			Summary: "One catalog entry with its content, step graph and problems",
			handler: getParams((*API).getCatalog)},
		{Method: "POST", Path: "/api/catalog/list", Function: FnCatalog, Scope: api, ID: "listCatalogPost",
			Summary: "NoETL's alias of GET /api/catalog, the filter in the body",
			handler: handle((*API).listCatalogBody)},
		{Method: "POST", Path: "/api/catalog/resource", Function: FnCatalog, Scope: api, ID: "getCatalogResource",
			Summary: "NoETL's alias of GET /api/catalog/{catalog_id}: by catalog_id, or path and version",
			handler: handle((*API).catalogResource)},
		// What NoETL's GUI asks of the catalog besides (docs/noetl-compat.md, "The GUI").
		{Method: "GET", Path: "/api/catalog/{path+}/ui_schema", Function: FnCatalog, Scope: api, ID: "getUISchema",
			Summary: "The form of a playbook's workload, inferred from the values it declares (NoETL's ui_schema)",
			handler: getParams((*API).uiSchema)},
		{Method: "GET", Path: "/api/catalog/playbook/content", Function: FnCatalog, Scope: api, ID: "getPlaybookContent",
			Summary: "A playbook's YAML by catalog_id or path (NoETL's GUI draws its flow from it)",
			handler: getParams((*API).playbookContent)},
		{Method: "POST", Path: "/api/catalog/playbooks/validate", Function: FnCatalog, Scope: api, ID: "validatePlaybook",
			Summary: "What register would say of a playbook, without registering it",
			handler: handle((*API).validatePlaybook)},

		{Method: "POST", Path: "/api/execute", Function: FnExecute, Scope: api, ID: "execute",
			Summary: "Start an execution of a registered playbook",
			handler: handle((*API).execute)},

		{Method: "POST", Path: "/api/events", Function: FnIngest, Scope: worker, ID: "postEvent", Tokenless: true,
			Summary: "Append one event (NoETL's EventRequest); orchestration runs for completions and failures",
			handler: handle((*API).ingest)},
		{Method: "POST", Path: "/api/events/batch", Function: FnIngest, Scope: worker, ID: "postEvents", Tokenless: true,
			Summary: "Append events of one execution, all or nothing",
			handler: handle((*API).ingestBatch)},
		{Method: "POST", Path: "/api/worker/report", Function: FnIngest, Scope: worker, ID: "workerReport", Tokenless: true,
			Summary: "Our worker's one request per step: events of any executions, claims, and commands taken",
			handler: handle((*API).report)},

		{Method: "GET", Path: "/api/commands/{event_id}", Function: FnClaim, Scope: worker, ID: "getCommand", Tokenless: true,
			Summary: "A command's body without claiming it",
			handler: getParams((*API).getCommand)},
		{Method: "POST", Path: "/api/commands/{event_id}/claim", Function: FnClaim, Scope: worker, ID: "claimCommand", Tokenless: true,
			Summary: "Claim a command (events.md §4); 409 when another worker holds it, 429 before a retry is due",
			handler: handleParams((*API).claim)},
		{Method: "POST", Path: "/api/commands/{event_id}/heartbeat", Function: FnClaim, Scope: worker, ID: "heartbeatCommand", Tokenless: true,
			Summary: "Extend a claimed command's lease",
			handler: handleParams((*API).heartbeat)},

		// The worker registry in NoETL's shapes (pools.go): NoETL's Python
		// worker re-registers every 15 s as its heartbeat, its Rust worker
		// beats on /heartbeat; NoETL's worker reads /api/pool/status.
		{Method: "POST", Path: "/api/worker/pool/register", Function: FnClaim, Scope: worker, ID: "registerWorker", Tokenless: true,
			Summary: "Register a worker (NoETL's pool registration, also its Python worker's heartbeat); the same process again extends its commands' leases",
			Body:    poolRegisterBody(), handler: handle((*API).registerPool)},
		{Method: "POST", Path: "/api/worker/pool/heartbeat", Function: FnClaim, Scope: worker, ID: "heartbeatWorker", Tokenless: true,
			Summary: "A worker's pool heartbeat: it is alive, and the leases of the commands it holds are extended; 404 for an unregistered worker",
			Body:    poolHeartbeatBody(), handler: handle((*API).poolHeartbeat)},
		{Method: "POST", Path: "/api/worker/pool/deregister", Function: FnClaim, Scope: worker, ID: "deregisterWorker", Tokenless: true,
			Summary: "Mark a worker offline (NoETL's workers call it as they stop)",
			Body:    poolDeregisterBody(), handler: handle((*API).deregisterPool)},
		{Method: "DELETE", Path: "/api/worker/pool/deregister", Function: FnClaim, Scope: worker, ID: "deregisterWorkerDelete", Tokenless: true,
			Summary: "NoETL's server's method for the same deregistration",
			Body:    poolDeregisterBody(), handler: handle((*API).deregisterPool)},
		{Method: "GET", Path: "/api/worker/pools", Function: FnStatus, Scope: api | worker, ID: "listWorkers",
			Summary: "The worker registry: who is alive, how busy (commands held), by name",
			handler: getParams((*API).listWorkerPools)},
		{Method: "GET", Path: "/api/pool/status", Function: FnStatus, Scope: api | worker, ID: "poolStatus", Tokenless: true,
			Summary: "NoETL's pool telemetry (the answering process's database connections) and the registry's totals",
			handler: get((*API).poolStatus)},
		// The database routes NoETL's CLI calls (database.go): validate reads;
		// init and execute need the admin scope, off unless an admin token
		// is configured (docs/security.md).
		{Method: "GET", Path: "/api/db/validate", Function: FnStatus, Scope: api, ID: "validateDatabase",
			Summary: "The schema of every database: migrations applied against this server's, tables found and missing",
			handler: get((*API).dbValidate)},
		{Method: "POST", Path: "/api/db/init", Function: FnStatus, Scope: admin, ID: "initDatabase",
			Summary: "Apply the migrations a database lacks (normally none), then the schema; the admin scope only",
			handler: handle((*API).dbInit)},
		{Method: "POST", Path: "/api/postgres/execute", Function: FnStatus, Scope: admin, ID: "executeSQL",
			Summary: "Run one read on the cluster or a shard database, read-only and rolled back, bounded in time and rows; the admin scope only",
			handler: handle((*API).postgresExecute)},
		{Method: "GET", Path: "/api/doctor", Function: FnStatus, Scope: api, ID: "doctor",
			Summary: "The executions that break the liveness invariant (nothing will move them, or their commands wait on a drain that is not running), each with why",
			handler: getParams((*API).doctor)},

		// The keychain in NoETL's credential API (credentials.go): users manage
		// credentials; a worker reads one's data for the execution it runs.
		{Method: "GET", Path: "/api/credentials", Function: FnKeychain, Scope: api, ID: "listCredentials",
			Summary: "List credentials (never their data)",
			handler: getParams((*API).listCredentials)},
		{Method: "POST", Path: "/api/credentials", Function: FnKeychain, Scope: api, ID: "putCredential",
			Summary: "Create or replace a credential by name; its data is stored sealed",
			handler: handle((*API).putCredential)},
		{Method: "POST", Path: "/api/credentials/rotate", Function: FnKeychain, Scope: api, ID: "rotateCredentials",
			Summary: "Reseal credentials under the current key; repeat until remaining is 0",
			handler: handle((*API).rotateCredentials)},
		{Method: "GET", Path: "/api/credentials/{identifier}", Function: FnKeychain, Scope: api | worker, ID: "getCredential",
			Summary: "A credential by id or name; its data only to the worker scope for a running execution; every read is logged",
			handler: getParams((*API).getCredential)},
		{Method: "DELETE", Path: "/api/credentials/{identifier}", Function: FnKeychain, Scope: api, ID: "deleteCredential",
			Summary: "Delete a credential by id or name",
			handler: getParams((*API).deleteCredential)},
		{Method: "GET", Path: "/api/credentials/{identifier}/reads", Function: FnKeychain, Scope: api, ID: "listCredentialReads",
			Summary: "A credential's reads (never the data), newest first",
			handler: getParams((*API).listCredentialReads)},

		// Execution variables (vars.go): the execution's durable context.
		{Method: "POST", Path: "/api/vars/{execution_id}", Function: FnIngest, Scope: api | worker, ID: "setVariables",
			Summary: "Set variables of a running execution: one ctx.updated event; later steps read ctx.<name>",
			Body:    varsBody(), handler: handleParams((*API).setVariables)},
		{Method: "GET", Path: "/api/vars/{execution_id}", Function: FnStatus, Scope: api | worker, ID: "listVariables",
			Summary: "An execution's variables (its durable context)",
			handler: getParams((*API).listVariables)},
		{Method: "GET", Path: "/api/vars/{execution_id}/{var_name}", Function: FnStatus, Scope: api | worker, ID: "getVariable",
			Summary: "One variable of an execution; 404 when unset",
			handler: getParams((*API).getVariable)},

		// Results staged by reference (staged.go), NoETL's result store routes.
		{Method: "PUT", Path: "/api/result/{execution_id}", Function: FnIngest, Scope: worker, ID: "stageResult",
			Summary: "Stage a result too large for an event; answers its noetl:// reference",
			Body:    stagedBody(), MaxBody: wire.MaxStagedResultBytes, handler: handleParams((*API).stageResult)},
		{Method: "GET", Path: "/api/result/resolve", Function: FnIngest, Scope: api | worker, ID: "resolveResult",
			Summary: "The value a result reference names",
			Reply:   anyJSON(), handler: getParams((*API).resolveResult)},

		{Method: "GET", Path: "/api/executions", Function: FnStatus, Scope: api, ID: "listExecutions",
			Summary: "List executions, newest first; the next page's cursor is in the X-Next-Cursor and Link headers",
			Reply:   array(shapeOf[wire.ExecutionSummary]()), handler: getParams((*API).listExecutions)},
		{Method: "GET", Path: "/api/executions/{id}", Function: FnStatus, Scope: api, ID: "getExecution",
			Summary: "An execution with its steps, context, result and one page of its events, newest first (view=summary: without the steps and the events)",
			handler: getParams((*API).getExecution)},
		{Method: "GET", Path: "/api/executions/{id}/events", Function: FnStatus, Scope: api, ID: "listExecutionEvents",
			Summary: "An execution's event log, paged by seq",
			handler: getParams((*API).listEvents)},
		{Method: "GET", Path: "/api/executions/{id}/status", Function: FnStatus, Scope: api, ID: "getExecutionStatus",
			Summary: "An execution's status and progress (events.md §6)",
			handler: getParams((*API).status)},
		{Method: "GET", Path: "/api/executions/{id}/cancellation-check", Function: FnStatus, Scope: api | worker, ID: "cancellationCheck", Tokenless: true,
			Summary: "Whether an execution is cancelled (NoETL's workers ask before running a command)",
			handler: getParams((*API).cancellationCheck)},
		{Method: "POST", Path: "/api/executions/{id}/cancel", Function: FnStatus, Scope: api, ID: "cancelExecution",
			Summary: "Cancel an execution and, unless cascade is false, its children; one that already ended is answered already_completed",
			handler: handleParams((*API).cancel)},
		{Method: "POST", Path: "/api/executions/cleanup", Function: FnStatus, Scope: api, ID: "cleanupExecutions",
			Summary: "Cancel the running executions nothing moved for N minutes (NoETL's cleanup of stuck executions); dry_run lists them",
			handler: handle((*API).cleanup)},
		{Method: "POST", Path: "/api/executions/{id}/stop", Function: FnStatus, Scope: api, ID: "stopExecution",
			Summary: "The cancel route under the name NoETL's GUI calls",
			handler: handleParams((*API).cancel)},
		{Method: "POST", Path: "/api/executions/{id}/rerun", Function: FnExecute, Scope: api, ID: "rerunExecution",
			Summary: "Start the execution's playbook version again with its workload, the given keys replacing its keys",
			handler: handleParams((*API).rerun)},
		{Method: "POST", Path: "/api/executions/{id}/redrive", Function: FnStatus, Scope: api, ID: "redriveExecution",
			Summary: "Continue a FAILED or CANCELLED execution in place under its version or a newer one: completed steps keep their results, the rest run; 409 when it is running or completed",
			handler: handleParams((*API).redrive)},
		{Method: "POST", Path: "/api/executions/redrive", Function: FnStatus, Scope: api, ID: "redriveExecutions",
			Summary: "Redrive up to 100 executions, each once, each answered redriven or refused",
			handler: handle((*API).redriveMany)},
		{Method: "POST", Path: "/api/executions/{id}/finalize", Function: FnStatus, Scope: api, ID: "finalizeExecution",
			Summary: "Force an execution to COMPLETED or FAILED (an operator's action)",
			handler: handleParams((*API).finalize)},

		{Method: "GET", Path: "/api/executions/{id}/replay", Function: FnReplay, Scope: api, ID: "replayExecution",
			Summary: "Fold an execution's event log into its projections (replay.md); parameter errors are 400 (R-A2)",
			Query:   replayQuery(), Reply: object(), handler: getParams((*API).replayByPath)},
		{Method: "GET", Path: "/api/replay/state", Function: FnReplay, Scope: api, ID: "replayState",
			Summary: "NoETL's path of the replay route, the execution in the query",
			Query:   append([]Param{execID}, replayQuery()...), Reply: object(), handler: get((*API).replayByQuery)},
		{Method: "POST", Path: "/api/whatif", Function: FnReplay, Scope: api, ID: "whatIf",
			Summary: "What a new playbook version would have done on recorded executions, answered from their recorded results: no tool runs, nothing is written",
			handler: handle((*API).whatIf)},

		{Method: "POST", Path: "/api/internal/outbox/claim", Function: FnOutbox, Scope: internal, ID: "outboxClaim",
			Summary: "Claim outbox rows to publish",
			handler: handle((*API).outboxClaim)},
		{Method: "POST", Path: "/api/internal/outbox/mark-published", Function: FnOutbox, Scope: internal, ID: "outboxMarkPublished",
			Summary: "Mark outbox rows published",
			handler: handle((*API).outboxMarkPublished)},
		{Method: "POST", Path: "/api/internal/outbox/mark-failed", Function: FnOutbox, Scope: internal, ID: "outboxMarkFailed",
			Summary: "Record a failed publish; the row is retried after a backoff",
			handler: handle((*API).outboxMarkFailed)},
		{Method: "GET", Path: "/api/internal/outbox/pending-count", Function: FnOutbox, Scope: internal, ID: "outboxPendingCount",
			Summary: "How many outbox rows wait to be published (what an autoscaler reads)",
			handler: get((*API).outboxPendingCount)},
		{Method: "POST", Path: "/api/internal/events/project", Function: FnOutbox, Scope: internal, ID: "projectEvents",
			Summary: "Append external informative events without orchestration, idempotent by event_id (R-A4)",
			handler: handle((*API).project)},
	}
	rs = append(rs, scheduleRoutes()...)
	for i, r := range rs {
		if r.Body == nil && r.handler.body != nil {
			rs[i].Body = r.handler.body()
		}
		if r.Reply == nil && r.handler.reply != nil {
			rs[i].Reply = r.handler.reply()
		}
		if r.Query == nil && r.handler.query != nil {
			rs[i].Query = r.handler.query()
		}
	}
	slices.SortFunc(rs, func(a, b Route) int {
		return cmp.Or(cmp.Compare(a.GatewayPath(), b.GatewayPath()), cmp.Compare(a.Method, b.Method), cmp.Compare(a.Path, b.Path))
	})
	return rs
}

// scheduleRoutes are the schedule routes (schedules.go), all of the
// schedules function.
func scheduleRoutes() []Route {
	const api = config.ScopeAPI
	return []Route{
		{Method: "POST", Path: "/api/schedules", Function: FnSchedules, Scope: api, ID: "createSchedule",
			Summary: "Create a schedule: a playbook started on a cron or an interval, once per due time",
			handler: handle((*API).createSchedule)},
		{Method: "GET", Path: "/api/schedules", Function: FnSchedules, Scope: api, ID: "listSchedules",
			Summary: "List schedules by id, paged by cursor",
			handler: getParams((*API).listSchedules)},
		{Method: "GET", Path: "/api/schedules/{id}", Function: FnSchedules, Scope: api, ID: "getSchedule",
			Summary: "One schedule with its next and last run",
			handler: getParams((*API).getSchedule)},
		{Method: "PATCH", Path: "/api/schedules/{id}", Function: FnSchedules, Scope: api, ID: "updateSchedule",
			Summary: "Change a schedule; enabled false pauses, true resumes from the next due time (no burst)",
			handler: handleParams((*API).updateSchedule)},
		{Method: "DELETE", Path: "/api/schedules/{id}", Function: FnSchedules, Scope: api, ID: "deleteSchedule",
			Summary: "Delete a schedule and its run log (its runs go on)",
			handler: getParams((*API).deleteSchedule)},
		{Method: "POST", Path: "/api/schedules/{id}/trigger", Function: FnSchedules, Scope: api, ID: "triggerSchedule",
			Summary: "Run a schedule now, under its overlap policy",
			handler: handleParams((*API).triggerSchedule)},
		{Method: "POST", Path: "/api/schedules/{id}/backfill", Function: FnSchedules, Scope: api, ID: "backfillSchedule",
			Summary: "Run every due time of a past range once, in order, under the overlap policy",
			handler: handleParams((*API).backfillSchedule)},
		{Method: "GET", Path: "/api/schedules/{id}/runs", Function: FnSchedules, Scope: api, ID: "listScheduleRuns",
			Summary: "A schedule's log: runs started and due times skipped, newest first",
			handler: getParams((*API).listScheduleRuns)},
	}
}

// RoutesJSON renders Routes in routes.json's format: one route per line with
// exactly method, path and function (infra/ and scripts/sam_transform.py read
// it; neither takes other keys).
func RoutesJSON() []byte {
	var b bytes.Buffer
	b.WriteString("[\n")
	rs := Routes()
	for i, r := range rs {
		fmt.Fprintf(&b, "  {\"method\": %q, \"path\": %q, \"function\": %q}", r.Method, r.GatewayPath(), r.Function)
		if i < len(rs)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("]\n")
	return b.Bytes()
}

// scopeName names a scope for messages.
func scopeName(s config.Scope) string {
	var names []string
	for _, n := range []struct {
		s    config.Scope
		name string
	}{{config.ScopeAPI, "api"}, {config.ScopeWorker, "worker"}, {config.ScopeInternal, "internal"}, {config.ScopeAdmin, "admin"}} {
		if s&n.s != 0 {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, "+")
}

// pattern is a compiled route path.
type pattern struct {
	route    Route
	segments []string // "{name}" segments are parameters, "{name+}" greedy
	greedy   int      // the greedy segment's index, or -1
	literals int      // more literal segments = more specific
}

func compile(r Route) pattern {
	segs := strings.Split(strings.TrimPrefix(r.Path, "/"), "/")
	p := pattern{route: r, segments: segs, greedy: -1}
	for i, s := range segs {
		switch {
		case isGreedy(s):
			p.greedy = i
		case !isParam(s):
			p.literals++
		}
	}
	return p
}

func isParam(seg string) bool  { return strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") }
func isGreedy(seg string) bool { return isParam(seg) && strings.HasSuffix(seg, "+}") }

// paramName is a parameter segment's name: {id} and {path+} name id and path.
func paramName(seg string) string { return strings.TrimSuffix(seg[1:len(seg)-1], "+") }

// match reports whether path fits the pattern and returns its parameters.
func (p pattern) match(path string) (map[string]string, bool) {
	segs, ok := segmentsOf(path)
	if !ok {
		return nil, false
	}
	return p.matchSegments(segs)
}

// segmentsOf splits a request path into its segments; false when it does
// not start with "/". Router.Find splits once for all its patterns.
func segmentsOf(path string) ([]string, bool) {
	if !strings.HasPrefix(path, "/") {
		return nil, false
	}
	return strings.Split(path[1:], "/"), true
}

// matchSegments is match over a path's segments (segmentsOf).
func (p pattern) matchSegments(segs []string) (map[string]string, bool) {
	n := len(p.segments)
	if len(segs) != n && (p.greedy < 0 || len(segs) < n) {
		return nil, false
	}
	var params map[string]string
	for i, s := range p.segments {
		seg := segs[i]
		switch {
		case i > p.greedy && p.greedy >= 0: // after the greedy segment: count from the end
			seg = segs[len(segs)-(n-i)]
		case i == p.greedy:
			seg = strings.Join(segs[i:len(segs)-(n-i-1)], "/")
			if slices.Contains(segs[i:len(segs)-(n-i-1)], "") {
				return nil, false
			}
		}
		if isParam(s) {
			if seg == "" {
				return nil, false
			}
			if params == nil {
				params = map[string]string{}
			}
			params[paramName(s)] = seg
			continue
		}
		if s != seg {
			return nil, false
		}
	}
	return params, true
}

// fromGateway reads API Gateway's path parameters for this route: a greedy
// parameter's value holds the segments the route declares after it, which
// must be there (false otherwise: no route).
func (p pattern) fromGateway(params map[string]string) (map[string]string, bool) {
	if p.greedy < 0 || p.greedy == len(p.segments)-1 {
		return params, true
	}
	name := paramName(p.segments[p.greedy])
	v, ok := strings.CutSuffix(params[name], "/"+strings.Join(p.segments[p.greedy+1:], "/"))
	if !ok || v == "" {
		return nil, false
	}
	out := maps.Clone(params)
	out[name] = v
	return out, true
}

// Router finds routes like API Gateway does: a route is method + path; among
// the routes of the request's method, literal segments beat parameters and
// parameters beat a greedy parameter.
type Router struct {
	patterns []pattern
	byKey    map[string]pattern // by API Gateway's route key
}

// NewRouter compiles routes.
func NewRouter(routes []Route) *Router {
	r := &Router{byKey: map[string]pattern{}}
	for _, rt := range routes {
		p := compile(rt)
		r.patterns = append(r.patterns, p)
		r.byKey[rt.GatewayKey()] = p
	}
	return r
}

// Find returns the route for method and path with its path parameters. When
// no route of that method matches, ok is false and allow lists the methods
// the path has (empty: the path is unknown).
func (r *Router) Find(method, path string) (route Route, params map[string]string, allow []string, ok bool) {
	var best *pattern
	segs, ok := segmentsOf(path)
	if !ok {
		return Route{}, nil, nil, false
	}
	for i := range r.patterns {
		p := &r.patterns[i]
		ps, matched := p.matchSegments(segs)
		if !matched {
			continue
		}
		if !slices.Contains(allow, p.route.Method) {
			allow = append(allow, p.route.Method)
		}
		if p.route.Method != method {
			continue
		}
		if best == nil || (p.greedy < 0) != (best.greedy < 0) && p.greedy < 0 ||
			(p.greedy < 0) == (best.greedy < 0) && p.literals > best.literals {
			best, params = p, ps
		}
	}
	slices.Sort(allow)
	if best == nil {
		return Route{}, nil, allow, false
	}
	return best.route, params, allow, true
}
