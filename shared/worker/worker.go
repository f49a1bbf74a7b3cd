// Package worker is the reference worker (worker.md): it pulls command
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
	"net/url"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/notify"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/redact"
	"github.com/noetl-go/noetl/shared/resultstore"
	"github.com/noetl-go/noetl/shared/tools"
)

// Config configures a Worker.
type Config struct {
	Client *client.Client
	JS     jetstream.JetStream
	// Pool is the pool served (events.md §5); default "shared".
	Pool     string
	WorkerID string
	// Concurrency bounds commands run at once; default 4.
	Concurrency int
	// Exec runs one tool attempt (shared/tools' Registry.Exec).
	Exec pipeline.Exec
	// Grace is how long shutdown waits for running commands before abandoning
	// them to lease expiry; default 30 s.
	Grace time.Duration
	// Results stores results whose data is larger than InlineLimit bytes of
	// JSON; they are posted by reference (worker.md §1). Without a store such
	// a result fails the command with an error that says so.
	Results     resultstore.Store
	InlineLimit int
	Logger      *slog.Logger
	// Secrets are masked in every result, error and output before it is
	// posted (see mask); nil: only the command's own secret-named values.
	Secrets *redact.Secrets
}

// DefaultInlineLimit is the largest result data posted inline (worker.md §1).
const DefaultInlineLimit = 256 << 10

// Worker runs commands of one pool.
type Worker struct {
	cfg Config
	log *slog.Logger
}

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
		cfg.Concurrency = 4
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 30 * time.Second
	}
	if cfg.InlineLimit <= 0 {
		cfg.InlineLimit = DefaultInlineLimit
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Worker{cfg: cfg, log: cfg.Logger.With("worker_id", cfg.WorkerID, "pool", cfg.Pool)}, nil
}

// Run pulls and runs commands until ctx is done, then stops pulling and lets
// running commands finish within the grace period; what is still running after
// it is abandoned (its lease expires and another worker takes it, R-L3).
func (w *Worker) Run(ctx context.Context) error {
	cons, err := notify.EnsureConsumer(ctx, w.cfg.JS, w.cfg.Pool)
	if err != nil {
		return fmt.Errorf("worker: consumer for pool %s: %w", w.cfg.Pool, err)
	}
	// Commands run on their own context, so shutdown can grant them a grace period.
	runCtx, abandon := context.WithCancel(context.WithoutCancel(ctx))
	defer abandon()
	slots := make(chan struct{}, w.cfg.Concurrency)
	var wg sync.WaitGroup
	w.log.InfoContext(ctx, "worker started", "concurrency", w.cfg.Concurrency)
	for ctx.Err() == nil {
		free := w.cfg.Concurrency - len(slots)
		if free == 0 {
			select {
			case slots <- struct{}{}:
				<-slots
			case <-ctx.Done():
			}
			continue
		}
		batch, err := cons.Fetch(free, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			if ctx.Err() == nil {
				w.log.WarnContext(ctx, "fetch failed; retrying", "error", err.Error())
				sleep(ctx, time.Second)
			}
			continue
		}
		for msg := range batch.Messages() {
			slots <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-slots; wg.Done() }()
				w.handle(runCtx, msg)
			}()
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && ctx.Err() == nil {
			w.log.WarnContext(ctx, "fetch ended with an error", "error", err.Error())
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(w.cfg.Grace):
		w.log.Warn("grace period over; abandoning running commands to lease expiry")
		abandon()
		<-done
	}
	w.log.Info("worker stopped")
	return nil
}

// handle claims the command a notification announces and runs it. The ack
// follows the claim (the lease, not the ack, guarantees delivery, events.md §5).
func (w *Worker) handle(ctx context.Context, msg jetstream.Msg) {
	var b struct {
		EventID json.Number `json:"event_id"`
	}
	if err := json.Unmarshal(msg.Data(), &b); err != nil || client.ID(string(b.EventID)) == 0 {
		w.log.Error("dropping a notification that is not a command body", "subject", msg.Subject(), "data", string(msg.Data()))
		_ = msg.Term()
		return
	}
	cmd, err := w.cfg.Client.Claim(ctx, client.ID(string(b.EventID)), w.cfg.WorkerID)
	var apiErr *client.Error
	switch {
	case err == nil:
		_ = msg.Ack()
		w.Execute(ctx, cmd)
	case errors.As(err, &apiErr) && (apiErr.Status == 409 || apiErr.Status == 404):
		_ = msg.Ack() // someone else has it, or it is over
	case errors.As(err, &apiErr) && apiErr.Status == 429:
		_ = msg.NakWithDelay(max(apiErr.RetryAfter, 100*time.Millisecond)) // R-L7
	default:
		meta, _ := msg.Metadata()
		delivered := uint64(1)
		if meta != nil {
			delivered = meta.NumDelivered
		}
		w.log.Warn("claim failed; redelivering later", "event_id", string(b.EventID), "error", err.Error())
		_ = msg.NakWithDelay(min(time.Duration(delivered)*time.Second, 30*time.Second))
	}
}

// Execute runs a claimed command to its reported end. A 409 on any report, or on
// a heartbeat, means the lease was lost: the worker stops and drops the result
// (worker.md §1.6).
func (w *Worker) Execute(ctx context.Context, cmd *client.Command) {
	log := w.log.With("execution_id", cmd.ExecutionID, "command_id", cmd.CommandID, "step", cmd.Step, "attempt", cmd.Attempt)
	timeout := time.Duration(intOf(cmd.Context["timeout_seconds"])) * time.Second
	if timeout <= 0 {
		timeout = time.Hour
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := w.post(ctx, cmd, "command.started", "RUNNING", map[string]any{"command_id": cmd.CommandID}, nil); err != nil {
		log.Warn("command.started not accepted; dropping the command", "error", err.Error())
		return
	}
	lost := make(chan struct{})
	stopBeat := w.heartbeat(runCtx, cmd, cancel, lost, log)
	started := time.Now()
	env := w.mask(cmd, w.run(runCtx, cmd))
	stopBeat()
	select {
	case <-lost:
		log.Warn("lease lost while running; dropping the result")
		return
	default:
	}
	if runCtx.Err() == context.DeadlineExceeded && env.Status != pipeline.StatusTimeout {
		env = pipeline.Envelope{Status: pipeline.StatusTimeout, Data: env.Data,
			Error: &pipeline.ErrorInfo{Message: fmt.Sprintf("the step timed out after %s", timeout), Kind: pipeline.KindTimeout, Retryable: true}}
	}
	if env.DurationMs == 0 {
		env.DurationMs = time.Since(started).Milliseconds()
	}
	env, uri := w.offload(ctx, cmd, env)
	result := env.Map()
	if uri != "" {
		delete(result, "data")
	}
	err := w.cfg.Client.PostEvent(ctx, w.event(cmd, "call.done", "COMPLETED",
		map[string]any{"command_id": cmd.CommandID, "result": result}, nil, uri))
	if err != nil {
		log.Warn("call.done not accepted; dropping the result", "error", err.Error())
		return
	}
	if env.Status == pipeline.StatusSuccess {
		err := w.post(ctx, cmd, "command.completed", "success", map[string]any{"command_id": cmd.CommandID, "status": "success"}, nil)
		if err != nil {
			log.Warn("command.completed not accepted", "error", err.Error())
		}
		log.Info("command completed", "duration_ms", env.DurationMs)
		return
	}
	msg := "the tool failed"
	if env.Error != nil {
		msg = env.Error.Message
	}
	class := "error"
	if env.Status == pipeline.StatusTimeout {
		class = "timeout"
	}
	if err := w.post(ctx, cmd, "command.failed", "FAILED", map[string]any{"command_id": cmd.CommandID, "error": msg},
		map[string]any{"class": class}); err != nil {
		log.Warn("command.failed not accepted", "error", err.Error())
	}
	log.Info("command failed", "error", msg, "class", class)
}

// run executes the command's tool, turning every failure (a config it cannot
// decode, a panic) into an error envelope so the worker keeps running.
func (w *Worker) run(ctx context.Context, cmd *client.Command) (env pipeline.Envelope) {
	defer func() {
		if r := recover(); r != nil {
			env = errorEnvelope(fmt.Sprintf("the worker panicked running the tool: %v", r))
		}
	}()
	// Tools that need the run's identity (python's context global, the playbook
	// tool's parent) read it from the context.
	ctx = tools.WithCall(ctx, tools.Call{ExecutionID: fmt.Sprint(cmd.ExecutionID), Step: cmd.Step})
	exec := w.cfg.Exec
	if cmd.Action == "task_sequence" {
		return pipeline.Run(ctx, cmd.Context, pipeline.Options{Exec: exec})
	}
	item, err := itemOf(cmd)
	if err != nil {
		return errorEnvelope(err.Error())
	}
	return exec(ctx, item)
}

// itemOf decodes a single tool's command (NoETL's shape: context.tool_config
// rendered, with args; kind from the action).
func itemOf(cmd *client.Command) (pipeline.Item, error) {
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
	return pipeline.Item{Label: cmd.Step, Kind: cmd.Action, Config: config, Input: input, Attempt: 1}, nil
}

func errorEnvelope(msg string) pipeline.Envelope {
	return pipeline.Envelope{Status: pipeline.StatusError, Error: &pipeline.ErrorInfo{Message: msg, Kind: pipeline.KindTool}}
}

// heartbeat extends the lease every third of it while the tool runs (worker.md
// §1.3); a 409 means the lease is gone: cancel the tool.
func (w *Worker) heartbeat(ctx context.Context, cmd *client.Command, cancel context.CancelFunc, lost chan struct{}, log *slog.Logger) (stop func()) {
	lease := time.Until(cmd.LeaseExpiresAt)
	if lease <= 0 {
		lease = 60 * time.Second
	}
	every := max(lease/3, 100*time.Millisecond)
	done := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				_, err := w.cfg.Client.Heartbeat(ctx, cmd.EventID, w.cfg.WorkerID, cmd.Attempt)
				if client.StatusOf(err) == 409 {
					once.Do(func() { close(lost) })
					cancel()
					return
				}
				if err != nil && ctx.Err() == nil {
					log.Warn("heartbeat failed", "error", err.Error())
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// offload stores a successful result's data by reference when its JSON is
// over the inline limit, returning the URI to post (worker.md §1). A result
// that cannot be stored fails the command, saying why and what to change.
func (w *Worker) offload(ctx context.Context, cmd *client.Command, env pipeline.Envelope) (pipeline.Envelope, string) {
	if env.Status != pipeline.StatusSuccess {
		return env, ""
	}
	b, err := jsonx.Marshal(env.Data)
	if err != nil || len(b) <= w.cfg.InlineLimit {
		return env, "" // an unencodable result fails at the post, with the encoder's error
	}
	fail := func(msg string) (pipeline.Envelope, string) {
		return pipeline.Envelope{Status: pipeline.StatusError, DurationMs: env.DurationMs,
			Error: &pipeline.ErrorInfo{Message: msg, Kind: pipeline.KindTool}}, ""
	}
	if w.cfg.Results == nil {
		return fail(fmt.Sprintf("the result is %d bytes of JSON, over the worker's inline limit of %d; give the worker a result store (noetl worker --result-store) or raise --inline-limit",
			len(b), w.cfg.InlineLimit))
	}
	name := fmt.Sprintf("%d/%s/attempt-%d.json", cmd.ExecutionID, url.PathEscape(cmd.CommandID), cmd.Attempt)
	uri, err := w.cfg.Results.Put(ctx, name, b)
	if err != nil {
		return fail(fmt.Sprintf("storing the %d-byte result by reference failed: %v", len(b), err))
	}
	return env, uri
}

// post reports one event with a client id derived from (command, attempt,
// type), so a re-post after a network error is idempotent.
func (w *Worker) post(ctx context.Context, cmd *client.Command, typ, status string, payload, meta map[string]any) error {
	return w.cfg.Client.PostEvent(ctx, w.event(cmd, typ, status, payload, meta, ""))
}

func (w *Worker) event(cmd *client.Command, typ, status string, payload, meta map[string]any, resultURI string) client.Event {
	m := map[string]any{"command_id": cmd.CommandID, "attempt": int64(cmd.Attempt)}
	for k, v := range meta {
		m[k] = v
	}
	return client.Event{ExecutionID: cmd.ExecutionID, Step: cmd.Step, Type: typ, Status: status, Payload: payload, Meta: m,
		WorkerID: w.cfg.WorkerID, ClientID: clientID(cmd.CommandID, cmd.Attempt, typ), ResultURI: resultURI}
}

// clientID is a positive id below 2^53 (JSON-safe everywhere).
func clientID(commandID string, attempt int, typ string) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s|%d|%s", commandID, attempt, typ)
	return int64(h.Sum64()&(1<<53-1)) | 1
}

func intOf(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case float64:
		return int64(x)
	}
	return 0
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
