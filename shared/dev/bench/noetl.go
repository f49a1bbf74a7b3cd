package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/notify"
)

// Protocol says who serves a shape's commands.
type Protocol string

const (
	// Ours is the project's worker: one report per step (the fast path).
	Ours Protocol = ""
	// NoETLCalls is NoETL's Rust worker's protocol: per command the claim,
	// then command.started, call.done (carrying the result) and
	// command.completed, each its own POST /api/events in NoETL's
	// ExecutorEvent shape — four requests per step.
	NoETLCalls Protocol = "noetl"
	// NoETLBatches is NoETL's Python worker's: the claim, then POST
	// /api/events/batch [command.started, step.enter] and, after the tool,
	// [call.done, step.exit, command.completed], each batch under its own
	// Idempotency-Key — three requests per step.
	NoETLBatches Protocol = "noetl-batch"
)

// NoETLWorker serves one pool of noop commands the way NoETL's workers talk
// to a control plane: notifications from NATS, then the claim and event calls
// of Protocol in NoETL's request shapes (docs/noetl-compat.md). It runs no
// tool: a noop's output is NoETL's noop output. It is a load client, written
// from the wire, not from NoETL's code.
type NoETLWorker struct {
	Server string
	// Token is sent as a bearer token when set (NoETL's workers send
	// NOETL_INTERNAL_API_TOKEN).
	Token    string
	ID       string
	Protocol Protocol
	// Concurrency is how many commands run at once (default 100).
	Concurrency int
	// Transport carries the requests (the bench counts them); nil: the
	// default.
	Transport http.RoundTripper

	hc      *http.Client
	eventNo atomic.Int64
	// Refused counts answers other than 2xx to event requests, and claims
	// refused other than 409: a load that is not served as it should be
	// (requests cut short by the worker's own stop are not counted).
	Refused atomic.Int64
}

// Run consumes pool's notifications from js until ctx ends.
func (w *NoETLWorker) Run(ctx context.Context, js jetstream.JetStream, pool string) error {
	if w.Concurrency <= 0 {
		w.Concurrency = 100
	}
	w.hc = &http.Client{Transport: w.Transport, Timeout: time.Minute}
	cons, err := notify.EnsureConsumer(ctx, js, pool)
	if err != nil {
		return err
	}
	slots := make(chan struct{}, w.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		batch, err := cons.Fetch(w.Concurrency, jetstream.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			continue
		}
		for m := range batch.Messages() {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return nil
			}
			wg.Add(1)
			go func() {
				defer func() { <-slots; wg.Done() }()
				w.handle(ctx, m)
			}()
		}
	}
	return nil
}

// claimed is what the workers read of a claim's answer.
type claimed struct {
	ExecutionID json.Number    `json:"execution_id"`
	NodeName    string         `json:"node_name"`
	Meta        map[string]any `json:"meta"`
}

func (w *NoETLWorker) handle(ctx context.Context, m jetstream.Msg) {
	var n notify.Body
	if err := json.Unmarshal(m.Data(), &n); err != nil {
		_ = m.Term()
		return
	}
	status, raw := w.post(ctx, fmt.Sprintf("/api/commands/%d/claim", n.EventID), "", map[string]any{"worker_id": w.ID})
	switch {
	case status == http.StatusOK:
	case status == http.StatusConflict:
		_ = m.Ack() // another worker has it, or it ended
		return
	default:
		w.refused(ctx)
		_ = m.NakWithDelay(100 * time.Millisecond)
		return
	}
	var c claimed
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&c); err != nil {
		w.refused(ctx)
		return
	}
	_ = m.Ack()
	commandID := n.CommandID
	if id, ok := c.Meta["command_id"].(string); ok && id != "" {
		commandID = id
	}
	attempts := c.Meta["attempts"]
	// NoETL's noop output.
	out := map[string]any{"status": "success", "data": map[string]any{"status": "ok", "message": "noop"}}
	if w.Protocol == NoETLBatches {
		w.batches(ctx, c, commandID, out)
		return
	}
	emit := func(typ, status string, body map[string]any) {
		body["command_id"] = commandID
		w.event(ctx, "/api/events", "", map[string]any{"execution_id": c.ExecutionID, "event_type": typ, "step": c.NodeName,
			"status": status, "created_at": time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"), "context": body,
			"event_id": w.clientEventID(), "worker_id": w.ID, "meta": map[string]any{"attempts": attempts}})
	}
	emit("command.started", "STARTED", map[string]any{})
	emit("call.done", "COMPLETED", map[string]any{"call_index": 0, "result": map[string]any{"status": "success", "context": out}})
	emit("command.completed", "success", map[string]any{"status": "success"})
}

// batches posts the Python worker's two batches of one command.
func (w *NoETLWorker) batches(ctx context.Context, c claimed, commandID string, out map[string]any) {
	step := c.NodeName
	informative := func(name string, payload map[string]any, meta map[string]any) map[string]any {
		e := map[string]any{"step": step, "name": name, "payload": payload, "actionable": name == "call.done", "informative": true}
		if meta != nil {
			e["meta"] = meta
		}
		return e
	}
	batch := func(events ...map[string]any) {
		key := fmt.Sprintf("%s:%s:%d", w.ID, c.ExecutionID, w.eventNo.Add(1))
		w.event(ctx, "/api/events/batch", key, map[string]any{"execution_id": c.ExecutionID.String(), "worker_id": w.ID, "events": events})
	}
	batch(informative("command.started", map[string]any{"command_id": commandID, "worker_id": w.ID}, nil),
		informative("step.enter", map[string]any{"status": "started"}, nil))
	result := map[string]any{"status": "COMPLETED", "context": map[string]any{"status": "success"}}
	meta := map[string]any{"command_id": commandID}
	batch(informative("call.done", map[string]any{"response": out, "command_id": commandID, "loop_event_id": nil,
		"loop_iteration_index": nil, "result": result}, meta),
		informative("step.exit", map[string]any{"status": "COMPLETED", "result": result, "error": nil, "command_id": commandID}, meta),
		informative("command.completed", map[string]any{"command_id": commandID, "worker_id": w.ID, "result": result}, nil))
}

// clientEventID is a producer's own event id, as NoETL's Rust worker makes
// them: milliseconds, then a sequence.
func (w *NoETLWorker) clientEventID() int64 {
	return time.Now().UnixMilli()<<22 | w.eventNo.Add(1)&(1<<22-1)
}

// event posts one event request, retried as NoETL's workers retry: three
// more times (after 0.5, 1 and 2 s), under the same body and key.
func (w *NoETLWorker) event(ctx context.Context, path, key string, body map[string]any) {
	for attempt := range 4 {
		if status, _ := w.post(ctx, path, key, body); status/100 == 2 {
			return
		}
		if attempt == 3 || sleep(ctx, 500*time.Millisecond<<attempt) != nil {
			break
		}
	}
	w.refused(ctx)
}

// refused counts a request the server did not take, unless the worker was
// stopping: a request its own stop cut short was never answered, so nothing
// refused it.
func (w *NoETLWorker) refused(ctx context.Context) {
	if ctx.Err() == nil {
		w.Refused.Add(1)
	}
}

// sleep waits d, or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// post sends one JSON request and returns the answer's status and body
// (status 0: no answer).
func (w *NoETLWorker) post(ctx context.Context, path, key string, body any) (int, []byte) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(w.Server, "/")+path, bytes.NewReader(b))
	if err != nil {
		return 0, nil
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if w.Token != "" {
		req.Header.Set("Authorization", "Bearer "+w.Token)
	}
	resp, err := w.hc.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}
