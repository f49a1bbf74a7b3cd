// Package worker is the reference worker (worker.md): it registers in the
// server's worker registry (registry.go), pulls command
// notifications from NATS JetStream, claims each command under a lease, runs its
// tool (pipelines through shared/pipeline), heartbeats while it runs, and
// reports call.done and command.completed/failed; a result over the inline
// limit goes to the result store and is posted by reference (result_kind
// "ref"). It speaks the same protocol as NoETL's workers, so either can serve
// either server.
package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/noetlwire"
	"github.com/noetl-go/noetl/shared/notify"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/redact"
	"github.com/noetl-go/noetl/shared/resultstore"
	"github.com/noetl-go/noetl/shared/toolkind"
	"github.com/noetl-go/noetl/shared/toolresult"
	"github.com/noetl-go/noetl/shared/tools"
	"github.com/noetl-go/noetl/shared/wire"
)

// Config configures a Worker.
type Config struct {
	Client *client.Client
	JS     jetstream.JetStream
	// Pool is the pool served (events.md §5); default "shared".
	Pool     string
	WorkerID string
	// Concurrency bounds commands run at once; default DefaultConcurrency.
	Concurrency int
	// Exec runs one tool attempt (shared/tools' Registry.Exec).
	Exec pipeline.Exec
	// Claim runs a cursor loop's claim command (shared/tools' Registry.Claim):
	// its transaction stays open until the report carrying its rows is taken
	// (settle true) or is not (false). Nil: claims run through Exec, committed
	// at once (as NoETL's workers run them).
	Claim func(context.Context, pipeline.Item) (toolresult.Envelope, func(accepted bool))
	// AwaitClaim waits for the cursor claim an iteration names (its payload's
	// cursor block) to end before the iteration runs (shared/tools' Registry.
	// AwaitClaim). Nil: iterations run at once.
	AwaitClaim func(ctx context.Context, cursor map[string]any) error
	// CloseTools, when set, is called as Run returns: what the tools keep
	// between commands (shared/tools' Registry.Close: idle connections)
	// is closed.
	CloseTools func()
	// PoolHeartbeat is how often the worker beats in the registry; default
	// noetlwire.PoolHeartbeatInterval (NoETL's workers' 15 s).
	PoolHeartbeat time.Duration
	// Grace is how long shutdown waits for running commands before abandoning
	// them to lease expiry; default 30 s.
	Grace time.Duration
	// Results stores results whose data is larger than InlineLimit bytes of
	// JSON; they are posted by reference (worker.md §1), and the references
	// commands name are read from it. Nil: the server's store, through its
	// API (ServerResults), which takes results up to
	// wire.MaxStagedResultBytes; a larger one fails its step saying so.
	Results     resultstore.Store
	InlineLimit int
	Logger      *slog.Logger
	// Secrets are masked in every result, error and output before it is
	// posted (see mask); nil: only the command's own secret-named values.
	Secrets *redact.Secrets
}

// DefaultConcurrency is how many commands a worker runs at once unless told
// (noetl worker, noetl dev and noetl corpus share it).
const DefaultConcurrency = 4

// DefaultInlineLimit is the largest result data posted inline (worker.md §1):
// NoETL's 64 KiB, which its playbooks test for (a result over it carries
// _ref).
const DefaultInlineLimit = 64 << 10

// Worker runs commands of one pool.
type Worker struct {
	cfg      Config
	log      *slog.Logger
	slots    *slots
	stopping atomic.Bool // take no more commands from reports
	// server and nats are what the worker knows of each one's
	// availability: one backoff per outage, shared by every caller.
	server, nats *outage
	rep          atomic.Pointer[reporter] // the running reporter, for the log lines
	// toolRuns counts the commands whose tools this worker ran (ToolRuns).
	toolRuns atomic.Int64
	// running holds the commands (id and attempt) this worker runs or has
	// yet to report, so one handed to it twice runs once: the server
	// answers our worker's claim of a command it already holds with the
	// command again (a report re-posted after a lost answer), and a command
	// a report was handed can also be announced again by the drain.
	runningMu sync.Mutex
	running   map[runKey]struct{}
}

// runKey names one attempt of a command.
type runKey struct {
	commandID string
	attempt   int
}

// begin marks cmd running; false: it already is (or awaits its report).
func (w *Worker) begin(cmd *wire.Command) bool {
	k := runKey{cmd.CommandID, cmd.Attempt}
	w.runningMu.Lock()
	defer w.runningMu.Unlock()
	if _, ok := w.running[k]; ok {
		return false
	}
	if w.running == nil {
		w.running = map[runKey]struct{}{}
	}
	w.running[k] = struct{}{}
	return true
}

// end forgets cmd: its result is reported, or dropped.
func (w *Worker) end(cmd *wire.Command) {
	w.runningMu.Lock()
	defer w.runningMu.Unlock()
	delete(w.running, runKey{cmd.CommandID, cmd.Attempt})
}

// ToolRuns is how many commands' tools the worker has run: what a test
// reads to prove something ran no tool (the what-if).
func (w *Worker) ToolRuns() int64 { return w.toolRuns.Load() }

// New returns a worker.
func New(cfg Config) (*Worker, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("worker: Config.Client is required")
	case cfg.JS == nil:
		return nil, errors.New("worker: Config.JS is required (a NATS JetStream connection)")
	case cfg.Exec == nil:
		return nil, errors.New("worker: Config.Exec is required (the tools)")
	case cfg.WorkerID == "":
		return nil, errors.New("worker: Config.WorkerID is required")
	}
	if cfg.Pool == "" {
		cfg.Pool = notify.PoolShared
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 30 * time.Second
	}
	if cfg.PoolHeartbeat <= 0 {
		cfg.PoolHeartbeat = noetlwire.PoolHeartbeatInterval
	}
	if cfg.InlineLimit <= 0 {
		cfg.InlineLimit = DefaultInlineLimit
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	w := &Worker{cfg: cfg, log: cfg.Logger.With("worker_id", cfg.WorkerID, "pool", cfg.Pool), slots: newSlots(cfg.Concurrency)}
	w.watchDependencies()
	if w.cfg.Results == nil {
		w.cfg.Results = ServerResults(cfg.Client)
	}
	if sr, ok := w.cfg.Results.(*serverResults); ok {
		sr.server = w.server // its requests share the worker's view of the server
	}
	return w, nil
}

// watchDependencies sets up what the worker knows of the server's and NATS's
// availability.
func (w *Worker) watchDependencies() {
	w.server, w.nats = newOutage(w.log, "the server"), newOutage(w.log, "NATS")
	w.server.attrs = func() []any {
		held := 0
		if r := w.rep.Load(); r != nil {
			held = r.held()
		}
		return []any{"server", w.cfg.Client.BaseURL(), "results_held", held}
	}
}

// Run pulls and runs commands until ctx is done, then stops pulling and lets
// running commands finish and be reported within the grace period; what is
// still running after it is abandoned (its lease expires and another worker
// takes it, R-L3). NATS or the API being unreachable is waited out with
// backoff, never a reason to exit.
func (w *Worker) Run(ctx context.Context) error {
	// Registered while it runs, commands finishing in the grace period
	// included; deregistered last.
	defer w.keepRegistered(context.WithoutCancel(ctx), w.cfg.PoolHeartbeat)()
	if w.cfg.CloseTools != nil {
		defer w.cfg.CloseTools()
	}
	cons, err := w.consumer(ctx)
	if err != nil {
		return nil // stopped before NATS came back
	}
	// Commands run (and are reported) on their own context, so shutdown can
	// grant them a grace period.
	runCtx, abandon := context.WithCancel(context.WithoutCancel(ctx))
	defer abandon()
	w.stopping.Store(false)
	rep := newReporter(w, runCtx)
	w.rep.Store(rep)
	w.log.InfoContext(ctx, "worker started", "concurrency", w.cfg.Concurrency)
	for ctx.Err() == nil {
		free := w.slots.waitFree(ctx)
		if free == 0 {
			continue // ctx done
		}
		tk, ok := w.nats.await(ctx)
		if !ok {
			continue // ctx done
		}
		// Fetch returns each message as it arrives; the wait only bounds an
		// empty pull.
		batch, err := cons.Fetch(free, jetstream.FetchMaxWait(time.Second))
		if err == nil {
			for msg := range batch.Messages() {
				if !w.slots.acquire(ctx, 1) {
					_ = msg.Nak()
					continue
				}
				w.handle(rep, msg)
			}
			if err = batch.Error(); errors.Is(err, jetstream.ErrNoMessages) {
				err = nil
			}
		}
		if err != nil {
			if ctx.Err() == nil {
				// One outage, one backoff. A NATS that restarted without
				// its stream has no consumer left to answer ("no
				// responders"): the pool's consumer is made again once the
				// stream is back (the server makes it at its next publish,
				// and announces pending commands again).
				w.nats.failed(tk, fmt.Errorf("fetch notifications: %w", err), 0)
				if c, err := w.consumer(ctx); err == nil {
					cons = c
				}
			}
			continue
		}
		w.nats.succeeded(tk)
	}
	// Take nothing more; let what runs finish and be reported (the reporter
	// keeps trying an unavailable server during the grace period).
	w.stopping.Store(true)
	grace, cancel := context.WithTimeout(context.Background(), w.cfg.Grace)
	defer cancel()
	abandoned := false
	if !w.slots.waitIdle(grace) {
		abandoned = true
		abandon()
	}
	rep.close()
	dropped := rep.dropped()
	for _, c := range dropped {
		c.done(false) // a claim held open rolls back: its rows go to another claim
	}
	if abandoned {
		ids := make([]string, len(dropped))
		for i, c := range dropped {
			ids[i] = c.cmd.CommandID
		}
		w.log.Warn("grace period over: stopped with commands still running and finished results not reported; each runs again once its lease expires",
			"grace", w.cfg.Grace.String(), "results_dropped", len(dropped), "dropped_command_ids", ids,
			"server_unavailable", w.server.isDown())
	}
	w.log.Info("worker stopped")
	return nil
}

// consumer makes the pool's durable consumer, retrying while NATS is away.
func (w *Worker) consumer(ctx context.Context) (jetstream.Consumer, error) {
	for {
		tk, ok := w.nats.await(ctx)
		if !ok {
			return nil, ctx.Err()
		}
		cons, err := notify.EnsureConsumer(ctx, w.cfg.JS, w.cfg.Pool)
		if err == nil {
			w.nats.succeeded(tk)
			return cons, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		w.nats.failed(tk, fmt.Errorf("make the pool's consumer: %w", err), 0)
	}
}

// handle passes the command a notification announces to the next report,
// which claims and starts it; the slot it holds passes to the command.
func (w *Worker) handle(rep *reporter, msg jetstream.Msg) {
	var b struct {
		EventID json.Number `json:"event_id"`
	}
	if err := json.Unmarshal(msg.Data(), &b); err != nil || client.ID(string(b.EventID)) == 0 {
		w.log.Error("dropping a notification that is not a command body", "subject", msg.Subject(), "data", string(msg.Data()))
		_ = msg.Term()
		w.slots.release(1)
		return
	}
	rep.claim(claim{msg: msg, eventID: client.ID(string(b.EventID))})
}

// settleClaim acks or naks a notification by its claim's outcome. The ack
// follows the claim (the lease, not the ack, guarantees delivery, events.md
// §5).
func (w *Worker) settleClaim(msg jetstream.Msg, o wire.ClaimOutcome) {
	switch {
	case o.Status == http.StatusOK:
		_ = msg.Ack()
	case o.Status == http.StatusConflict || o.Status == http.StatusNotFound:
		_ = msg.Ack() // someone else has it, or it is over
	case o.Status == http.StatusTooManyRequests:
		_ = msg.NakWithDelay(max(time.Duration(o.RetryAfterSeconds)*time.Second, 100*time.Millisecond)) // R-L7
	case o.Status == http.StatusServiceUnavailable:
		redeliver(msg) // its shard's database is away; the outage is logged once
	default:
		w.log.Warn("claim failed; redelivering later", "event_id", o.EventID, "status", o.Status, "error", o.Error)
		redeliver(msg)
	}
}

// redeliver naks a notification with a delay that grows with its deliveries.
func redeliver(msg jetstream.Msg) {
	delivered := uint64(1)
	if meta, _ := msg.Metadata(); meta != nil {
		delivered = meta.NumDelivered
	}
	_ = msg.NakWithDelay(min(time.Duration(delivered)*time.Second, 30*time.Second))
}

// execute runs a claimed and started command and queues its completion for
// the reporter, which reports it with others in one request. A 409 on a
// heartbeat means the lease was lost: the worker stops and drops the result
// (worker.md §1.6).
func (w *Worker) execute(ctx context.Context, rep *reporter, cmd *wire.Command) {
	log := w.log.With("execution_id", cmd.ExecutionID, "command_id", cmd.CommandID, "step", cmd.NodeName, "attempt", cmd.Attempt)
	timeout := time.Duration(jsonx.Int(cmd.Context["timeout_seconds"])) * time.Second
	if timeout <= 0 {
		timeout = time.Hour
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	lost := make(chan struct{})
	// The lease is kept until the server has taken the result, not only while
	// the tool runs: a report can wait behind others or a slow answer, and a
	// lease that ran out meanwhile refuses it (a 3 s lease under load did).
	stopBeat := w.heartbeat(ctx, cmd, cancel, lost, log)
	started := time.Now()
	env, settle := w.runCommand(runCtx, cmd)
	env = w.mask(cmd, env)
	if runCtx.Err() == context.DeadlineExceeded && env.Status != toolresult.StatusTimeout {
		env = toolresult.Envelope{Status: toolresult.StatusTimeout, Data: env.Data,
			Error: &toolresult.ErrorInfo{Message: fmt.Sprintf("the step timed out after %s", timeout), Kind: toolresult.KindTimeout, Retryable: true}}
	}
	if env.DurationMs == 0 {
		env.DurationMs = time.Since(started).Milliseconds()
	}
	var uri string
	if !isClosed(lost) {
		// Storing a large result is the command's work too: the lease is
		// kept alive while it uploads (60 MB under load outlasted a lease).
		env, uri = w.offload(ctx, cmd, env)
	}
	if isClosed(lost) {
		stopBeat()
		log.Warn("lease lost while running; dropping the result")
		settle(false)
		w.end(cmd)
		w.slots.release(1)
		return
	}
	c := completionOf(cmd, env, uri, w.cfg.WorkerID)
	c.settle = func(accepted bool) {
		stopBeat()
		settle(accepted)
		w.end(cmd)
	}
	rep.add(c)
}

// isClosed says whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// runCommand runs a command: a cursor claim through Claim, holding its
// transaction until settle says whether the server took its rows; anything
// else through run (settle does nothing).
func (w *Worker) runCommand(ctx context.Context, cmd *wire.Command) (env toolresult.Envelope, settle func(bool)) {
	cursor, _ := cmd.Context["cursor"].(map[string]any)
	if w.cfg.Claim == nil || cursor["claim"] != true {
		if cursor != nil && w.cfg.AwaitClaim != nil {
			if err := w.cfg.AwaitClaim(ctx, cursor); err != nil {
				env := errorEnvelope("the iteration's cursor claim: " + err.Error())
				env.Error.Kind = toolresult.KindConnection
				return env, func(bool) {}
			}
		}
		return w.run(ctx, cmd), func(bool) {}
	}
	settle = func(bool) {}
	defer func() {
		if r := recover(); r != nil {
			env = errorEnvelope(fmt.Sprintf("the worker panicked running the claim: %v", r))
		}
	}()
	item, err := itemOf(cmd)
	if err != nil {
		return errorEnvelope(err.Error()), settle
	}
	return w.cfg.Claim(ctx, item)
}

// completionOf is the one event that ends a command on the fast path:
// command.completed or command.failed carrying the tool's result, so no
// call.done precedes it (R-R3).
func completionOf(cmd *wire.Command, env toolresult.Envelope, resultURI, workerID string) completion {
	result := env.Map()
	if resultURI != "" {
		delete(result, "data")
	}
	payload := map[string]any{"command_id": cmd.CommandID, "result": result}
	meta := map[string]any{"command_id": cmd.CommandID, "attempt": int64(cmd.Attempt)}
	typ, status := eventtype.CommandCompleted, "success"
	if env.Status != toolresult.StatusSuccess {
		typ, status = eventtype.CommandFailed, "FAILED"
		msg := "the tool failed"
		if env.Error != nil {
			msg = env.Error.Message
		}
		payload["error"] = msg
		meta["class"] = "error"
		if env.Status == toolresult.StatusTimeout {
			meta["class"] = "timeout"
		}
	}
	ev := wire.EventRequest{ExecutionID: wire.ID(cmd.ExecutionID), EventFields: wire.EventFields{Step: cmd.NodeName, EventType: typ, Status: status,
		Payload: payload, Meta: meta, WorkerID: workerID, EventID: clientID(cmd.CommandID, cmd.Attempt, typ)}}
	if resultURI != "" {
		ev.ResultKind, ev.ResultURI = "ref", resultURI
	}
	return completion{cmd: cmd, event: ev}
}

// run executes the command's tool, turning every failure (a config it cannot
// decode, a panic) into an error envelope so the worker keeps running.
func (w *Worker) run(ctx context.Context, cmd *wire.Command) (env toolresult.Envelope) {
	w.toolRuns.Add(1)
	defer func() {
		if r := recover(); r != nil {
			env = errorEnvelope(fmt.Sprintf("the worker panicked running the tool: %v", r))
		}
	}()
	// Tools that need the run's identity (python's context global, the playbook
	// tool's parent) read it from the context.
	ctx = tools.WithCall(ctx, tools.Call{ExecutionID: fmt.Sprint(cmd.ExecutionID), Step: cmd.NodeName,
		CommandID: cmd.CommandID, Attempt: cmd.Attempt})
	if err := w.loadReferences(ctx, cmd); err != nil {
		return errorEnvelope(err.Error())
	}
	exec := w.cfg.Exec
	if cmd.Action == toolkind.TaskSequence {
		return pipeline.Run(ctx, cmd.Context, pipeline.Options{Exec: exec})
	}
	item, err := itemOf(cmd)
	if err != nil {
		return errorEnvelope(err.Error())
	}
	return exec(ctx, item)
}

// loadReferences reads the results the command names by reference
// (pipeline.RefMarker) from the result store into its render_context,
// within a worker's bound (resultstore.WorkerMaxDecodedBytes, above the
// server's: a worker holds no execution's lock).
func (w *Worker) loadReferences(ctx context.Context, cmd *wire.Command) error {
	_, err := pipeline.ResolveRefs(ctx, cmd.Context, func(ctx context.Context, uri string) (any, error) {
		return resultstore.ReadJSONWithin(ctx, w.cfg.Results, uri, int64(cmd.ExecutionID), resultstore.WorkerMaxDecodedBytes)
	})
	return err
}

// itemOf decodes a single tool's command (NoETL's shape: context.tool_config
// rendered, with args; kind from the action).
func itemOf(cmd *wire.Command) (pipeline.Item, error) {
	raw, ok := cmd.Context["tool_config"]
	if !ok {
		return pipeline.Item{}, errors.New("cannot decode the command: context.tool_config is missing")
	}
	cfg, ok := raw.(map[string]any)
	if !ok {
		return pipeline.Item{}, fmt.Errorf("cannot decode the command: context.tool_config must be an object, got %T", raw)
	}
	config := make(map[string]any, len(cfg)+3)
	for k, v := range cfg {
		if k != "args" && k != "input" {
			config[k] = v
		}
	}
	config["kind"] = cmd.Action
	input, _ := cfg["args"].(map[string]any)
	if input == nil {
		input, _ = cmd.Context["args"].(map[string]any)
	}
	if input == nil {
		input = map[string]any{}
	}
	// What the step's templates could read, for python's context (the engine sends
	// the names the code mentions).
	rc, _ := cmd.Context["render_context"].(map[string]any)
	return pipeline.Item{Label: cmd.NodeName, Kind: cmd.Action, Config: config, Input: input, Attempt: 1, Context: rc}, nil
}

func errorEnvelope(msg string) toolresult.Envelope {
	return toolresult.Envelope{Status: toolresult.StatusError, Error: &toolresult.ErrorInfo{Message: msg, Kind: toolresult.KindTool}}
}

// heartbeat extends the lease every third of it from the command's start
// until its result is taken or dropped (worker.md §1.3); a 409 means the
// lease is gone: cancel the tool. While the server is
// unavailable a beat goes only as the worker's probe (w.server): the lease
// lapses meanwhile, and the server gives its holder a lease's time after an
// outage before it takes it away.
func (w *Worker) heartbeat(ctx context.Context, cmd *wire.Command, cancel context.CancelFunc, lost chan struct{}, log *slog.Logger) (stop func()) {
	// Each beat comes a third of the remaining lease after the last: the
	// first one at once when the command arrives with little of its lease
	// left (a long transaction or a slow answer spent it).
	expires := cmd.LeaseExpiresAt.Time
	if expires.IsZero() {
		expires = time.Now().Add(60 * time.Second)
	}
	next := func() time.Duration { return max(time.Until(expires)/3, 100*time.Millisecond) }
	ctx, stopBeats := context.WithCancel(ctx)
	var once sync.Once
	go func() {
		t := time.NewTimer(next())
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			t.Reset(max(time.Second, next()))
			tk, _, ok := w.server.admit()
			if !ok {
				continue // another request probes the server
			}
			until, err := w.cfg.Client.Heartbeat(ctx, int64(cmd.EventID), w.cfg.WorkerID, cmd.Attempt)
			if err == nil && !until.IsZero() {
				expires = until
				t.Reset(next())
			}
			switch {
			case ctx.Err() != nil:
				w.server.abandoned(tk)
				return
			case client.StatusOf(err) == http.StatusConflict:
				w.server.succeeded(tk)
				once.Do(func() { close(lost) })
				cancel()
				return
			case client.Unavailable(err) || client.StatusOf(err) >= 500:
				w.server.failed(tk, fmt.Errorf("heartbeat: %w", err), client.RetryAfterOf(err))
			case err != nil:
				w.server.succeeded(tk)
				log.Warn("heartbeat failed", "error", err.Error())
			default:
				w.server.succeeded(tk)
			}
		}
	}()
	// Stopping does not wait for the beat in flight, if any: it is cut short
	// (the reporter calls this for every result it settles, and must not
	// wait on one goroutine after another), and a 409 it may still get is
	// for a result already settled.
	return stopBeats
}

// offload stores a successful result's data by reference when its JSON is
// over the inline limit, returning the URI to post (worker.md §1). A result
// that cannot be stored fails the command, saying why and what to change.
func (w *Worker) offload(ctx context.Context, cmd *wire.Command, env toolresult.Envelope) (toolresult.Envelope, string) {
	if env.Status != toolresult.StatusSuccess {
		return env, ""
	}
	b, err := jsonx.Marshal(env.Data)
	if err != nil || len(b) <= w.cfg.InlineLimit {
		return env, "" // an unencodable result fails at the post, with the encoder's error
	}
	fail := func(msg string) (toolresult.Envelope, string) {
		return toolresult.Envelope{Status: toolresult.StatusError, DurationMs: env.DurationMs,
			Error: &toolresult.ErrorInfo{Message: msg, Kind: toolresult.KindTool}}, ""
	}
	name := fmt.Sprintf("%d/%s/attempt-%d.json", cmd.ExecutionID, url.PathEscape(cmd.CommandID), cmd.Attempt)
	uri, err := w.cfg.Results.Put(ctx, name, b)
	if err != nil {
		return fail(fmt.Sprintf("the result is %d bytes of JSON, over the worker's inline limit of %d (--inline-limit), and storing it by reference failed: %v",
			len(b), w.cfg.InlineLimit, err))
	}
	return env, uri
}

// clientID is an event's client id: a positive integer below 2^53
// (JSON-safe everywhere), sent as its decimal text.
func clientID(commandID string, attempt int, typ string) wire.Scalar {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s|%d|%s", commandID, attempt, typ)
	return wire.Scalar(strconv.FormatInt(int64(h.Sum64()&(1<<53-1))|1, 10))
}
