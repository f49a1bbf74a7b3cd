// Package client is a Go client for the control plane's HTTP API (api.md), used
// by the worker, the CLI and the playbook tool. It speaks the wire format only:
// ids arrive as strings (R-I2) or, in command bodies, as NoETL's integers, and
// are accepted either way.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/noetl-go/noetl/shared/ids"
	"github.com/noetl-go/noetl/shared/jsonx"
)

// Client calls one control plane.
type Client struct {
	base  string
	token string
	http  *http.Client
	// Retries is how often an idempotent call is retried on 5xx or a network
	// error (worker.md §1.5); default 5.
	Retries int
}

// Option configures a Client.
type Option func(*Client)

// WithTransport sends requests through rt (to count or trace them, say)
// instead of the client's own pooled transport.
func WithTransport(rt http.RoundTripper) Option {
	return func(c *Client) { c.http.Transport = rt }
}

// maxIdlePerHost keeps a connection per concurrent request to one server: a
// worker runs dozens of commands at once, and net/http's default of 2 idle
// connections per host made it redial for most requests.
const maxIdlePerHost = 256

// New returns a client for baseURL (e.g. http://127.0.0.1:8082) with a bearer
// token ("" for an open server).
func New(baseURL, token string, opts ...Option) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = maxIdlePerHost, maxIdlePerHost
	c := &Client{base: strings.TrimRight(baseURL, "/"), token: token,
		http: &http.Client{Timeout: 60 * time.Second, Transport: tr}, Retries: 5}
	for _, o := range opts {
		o(c)
	}
	return c
}

// BaseURL is the server the client calls.
func (c *Client) BaseURL() string { return c.base }

// Error is a non-2xx answer: {"error", "status"} plus Retry-After when given.
type Error struct {
	Status     int
	Message    string
	RetryAfter time.Duration
}

func (e *Error) Error() string { return fmt.Sprintf("%d: %s", e.Status, e.Message) }

// StatusOf returns the HTTP status of an *Error, 0 for other errors.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// do sends one request; idempotent requests are retried with backoff on 5xx and
// network errors. out, when not nil, receives the decoded JSON object.
func (c *Client) do(ctx context.Context, method, path string, body any, idempotent bool, out *map[string]any) error {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = jsonx.Marshal(body); err != nil {
			return fmt.Errorf("encode %s %s: %w", method, path, err)
		}
	}
	attempts := 1
	if idempotent {
		attempts += max(c.Retries, 0)
	}
	var last error
	for i := range attempts {
		if i > 0 {
			wait := time.Duration(float64(200*time.Millisecond) * float64(uint(1)<<min(i-1, 6)) * (0.5 + rand.Float64()))
			select {
			case <-ctx.Done():
				return errors.Join(last, ctx.Err())
			case <-time.After(min(wait, 10*time.Second)):
			}
		}
		last = c.once(ctx, method, path, payload, out)
		if last == nil {
			return nil
		}
		if s := StatusOf(last); s != 0 && s < 500 {
			return last // the server answered: retrying will not change it
		}
		if ctx.Err() != nil {
			return last
		}
	}
	return last
}

func (c *Client) once(ctx context.Context, method, path string, payload []byte, out *map[string]any) error {
	return c.onceAny(ctx, method, path, payload, out, nil, nil)
}

// onceAny is once for any answer: an object into out, an array into list,
// the response headers into hdr (each may be nil).
func (c *Client) onceAny(ctx context.Context, method, path string, payload []byte, out *map[string]any, list *[]any, hdr *http.Header) error {
	var rdr io.Reader
	if payload != nil {
		rdr = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rdr)
	if err != nil {
		return err
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	var obj map[string]any
	if trimmed := bytes.TrimSpace(raw); list != nil && resp.StatusCode < 300 && len(trimmed) > 0 && trimmed[0] == '[' {
		v, err := jsonx.Decode(raw)
		if err != nil {
			return fmt.Errorf("%s %s: the answer is not JSON: %w", method, path, err)
		}
		*list, _ = v.([]any)
		if hdr != nil {
			*hdr = resp.Header
		}
		return nil
	}
	if len(bytes.TrimSpace(raw)) > 0 {
		if obj, err = jsonx.DecodeObject(raw); err != nil && resp.StatusCode < 300 {
			return fmt.Errorf("%s %s: the answer is not a JSON object: %w", method, path, err)
		}
	}
	if resp.StatusCode >= 300 {
		e := &Error{Status: resp.StatusCode, Message: strings.TrimSpace(string(raw))}
		if m, ok := obj["error"].(string); ok {
			e.Message = m
		}
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			if secs, err := strconv.ParseFloat(ra, 64); err == nil {
				e.RetryAfter = time.Duration(secs * float64(time.Second))
			}
		}
		return e
	}
	if out != nil {
		*out = obj
	}
	if hdr != nil {
		*hdr = resp.Header
	}
	return nil
}

// ID reads an id given as a number or a numeric string.
func ID(v any) int64 {
	id, err := ids.Parse(v)
	if err != nil {
		return 0
	}
	return id
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// ---- catalog and executions ----

// Registered is the answer to a registration.
type Registered struct {
	CatalogID int64
	Path      string
	Version   int
	Warnings  []any
}

// Register registers a playbook's YAML.
func (c *Client) Register(ctx context.Context, content string) (*Registered, error) {
	var out map[string]any
	if err := c.do(ctx, http.MethodPost, "/api/catalog/register", map[string]any{"content": content}, true, &out); err != nil {
		return nil, err
	}
	v, _ := out["version"].(int64)
	w, _ := out["warnings"].([]any)
	return &Registered{CatalogID: ID(out["catalog_id"]), Path: str(out["path"]), Version: int(v), Warnings: w}, nil
}

// ExecuteRequest starts an execution; set Path or CatalogID.
type ExecuteRequest struct {
	Path              string
	CatalogID         int64
	Version           int
	Payload           map[string]any
	ParentExecutionID int64
	Pool              string
	IdempotencyKey    string
}

// Execute starts an execution and returns its id.
func (c *Client) Execute(ctx context.Context, r ExecuteRequest) (int64, error) {
	body := map[string]any{"payload": r.Payload}
	if body["payload"] == nil {
		body["payload"] = map[string]any{}
	}
	if r.Path != "" {
		body["path"] = r.Path
	}
	if r.CatalogID != 0 {
		body["catalog_id"] = strconv.FormatInt(r.CatalogID, 10)
	}
	if r.Version != 0 {
		body["version"] = int64(r.Version)
	}
	if r.ParentExecutionID != 0 {
		body["parent_execution_id"] = strconv.FormatInt(r.ParentExecutionID, 10)
	}
	if r.Pool != "" {
		body["execution_pool"] = r.Pool
	}
	if r.IdempotencyKey != "" {
		body["idempotency_key"] = r.IdempotencyKey
	}
	var out map[string]any
	// Without an idempotency key a retried execute could start two runs.
	if err := c.do(ctx, http.MethodPost, "/api/execute", body, r.IdempotencyKey != "", &out); err != nil {
		return 0, err
	}
	return ID(out["execution_id"]), nil
}

// Execution returns GET /api/executions/{id} as decoded JSON.
func (c *Client) Execution(ctx context.Context, id int64) (map[string]any, error) {
	var out map[string]any
	err := c.do(ctx, http.MethodGet, "/api/executions/"+strconv.FormatInt(id, 10), nil, true, &out)
	return out, err
}

// Status returns GET /api/executions/{id}/status.
func (c *Client) Status(ctx context.Context, id int64) (map[string]any, error) {
	var out map[string]any
	err := c.do(ctx, http.MethodGet, "/api/executions/"+strconv.FormatInt(id, 10)+"/status", nil, true, &out)
	return out, err
}

// Events returns one page of an execution's events after afterSeq.
func (c *Client) Events(ctx context.Context, id, afterSeq int64, limit int) ([]map[string]any, int64, error) {
	q := url.Values{}
	if afterSeq > 0 {
		q.Set("after_seq", strconv.FormatInt(afterSeq, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out map[string]any
	path := "/api/executions/" + strconv.FormatInt(id, 10) + "/events"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	if err := c.do(ctx, http.MethodGet, path, nil, true, &out); err != nil {
		return nil, 0, err
	}
	list, _ := out["events"].([]any)
	evs := make([]map[string]any, 0, len(list))
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			evs = append(evs, m)
		}
	}
	next := ID(out["next_after_seq"])
	return evs, next, nil
}

// ListExecutions returns one page of GET /api/executions with the given query
// (path, status, limit ≤ 100, offset, cursor, …) and the cursor of the next
// page ("" at the end). The body is NoETL's bare array; the cursor travels in
// the X-Next-Cursor header.
func (c *Client) ListExecutions(ctx context.Context, q url.Values) ([]map[string]any, string, error) {
	path := "/api/executions"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var list []any
	var hdr http.Header
	var err error
	for i := range 1 + max(c.Retries, 0) { // a read: retried like do's idempotent requests
		if i > 0 {
			select {
			case <-ctx.Done():
				return nil, "", errors.Join(err, ctx.Err())
			case <-time.After(time.Duration(200<<min(i-1, 6)) * time.Millisecond):
			}
		}
		if err = c.onceAny(ctx, http.MethodGet, path, nil, nil, &list, &hdr); err == nil {
			break
		}
		if s := StatusOf(err); s != 0 && s < 500 {
			break
		}
	}
	if err != nil {
		return nil, "", err
	}
	rows := make([]map[string]any, 0, len(list))
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			rows = append(rows, m)
		}
	}
	return rows, hdr.Get("X-Next-Cursor"), nil
}

// Cancel cancels an execution.
func (c *Client) Cancel(ctx context.Context, id int64, reason string) (map[string]any, error) {
	var out map[string]any
	err := c.do(ctx, http.MethodPost, "/api/executions/"+strconv.FormatInt(id, 10)+"/cancel", map[string]any{"reason": reason}, true, &out)
	return out, err
}

// Replay returns the replay document with the given query parameters.
func (c *Client) Replay(ctx context.Context, id int64, q url.Values) (map[string]any, error) {
	path := "/api/executions/" + strconv.FormatInt(id, 10) + "/replay"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out map[string]any
	err := c.do(ctx, http.MethodGet, path, nil, true, &out)
	return out, err
}

// Terminal reports whether an execution status is final.
func Terminal(status string) bool {
	switch status {
	case "COMPLETED", "FAILED", "CANCELLED":
		return true
	}
	return false
}

// Wait polls an execution's status until it ends or ctx is done.
func (c *Client) Wait(ctx context.Context, id int64, every time.Duration) (map[string]any, error) {
	for {
		st, err := c.Status(ctx, id)
		if err != nil {
			return nil, err
		}
		if Terminal(str(st["status"])) {
			return c.Execution(ctx, id)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(every):
		}
	}
}

// ---- worker protocol ----

// Command is a claimed command (NoETL's claim response).
type Command struct {
	EventID        int64
	ExecutionID    int64
	CommandID      string
	Step           string
	Action         string
	Context        map[string]any
	Meta           map[string]any
	Attempt        int
	LeaseExpiresAt time.Time
}

// Claim claims the command a notification announced. start records the
// start with the claim (the caller runs the command at once), so no
// command.started is posted.
func (c *Client) Claim(ctx context.Context, eventID int64, workerID string, start bool) (*Command, error) {
	var out map[string]any
	path := "/api/commands/" + strconv.FormatInt(eventID, 10) + "/claim"
	body := map[string]any{"worker_id": workerID}
	if start {
		body["start"] = true
	}
	if err := c.do(ctx, http.MethodPost, path, body, true, &out); err != nil {
		return nil, err
	}
	return commandOf(out), nil
}

// commandOf reads a command body (NoETL's claim response shape).
func commandOf(out map[string]any) *Command {
	cmd := &Command{EventID: ID(out["event_id"]), ExecutionID: ID(out["execution_id"]), Step: str(out["node_name"]),
		Action: str(out["action"]), CommandID: str(out["command_id"])}
	cmd.Context, _ = out["context"].(map[string]any)
	cmd.Meta, _ = out["meta"].(map[string]any)
	if cmd.CommandID == "" {
		cmd.CommandID = str(cmd.Meta["command_id"])
	}
	if a, ok := out["attempt"].(int64); ok {
		cmd.Attempt = int(a)
	} else if a, ok := cmd.Meta["attempt"].(int64); ok {
		cmd.Attempt = int(a)
	}
	if t, err := time.Parse(time.RFC3339Nano, str(out["lease_expires_at"])); err == nil {
		cmd.LeaseExpiresAt = t
	}
	return cmd
}

// Heartbeat extends the lease of a held command.
func (c *Client) Heartbeat(ctx context.Context, eventID int64, workerID string, attempt int) (time.Time, error) {
	var out map[string]any
	path := "/api/commands/" + strconv.FormatInt(eventID, 10) + "/heartbeat"
	if err := c.do(ctx, http.MethodPost, path, map[string]any{"worker_id": workerID, "attempt": int64(attempt)}, true, &out); err != nil {
		return time.Time{}, err
	}
	t, _ := time.Parse(time.RFC3339Nano, str(out["lease_expires_at"]))
	return t, nil
}

// Event is one event a worker posts.
type Event struct {
	ExecutionID int64
	Step        string
	Type        string
	Status      string
	Payload     map[string]any
	Meta        map[string]any
	WorkerID    string
	// ClientID makes re-posts idempotent (the event_id of the request).
	ClientID int64
	// ResultURI posts the result by reference (result_kind "ref"): the data
	// lives at this URI in the result store, not in the payload.
	ResultURI string
}

// PostEvent posts one event; it is retried on 5xx since its client id makes it
// idempotent.
func (c *Client) PostEvent(ctx context.Context, e Event) error {
	return c.do(ctx, http.MethodPost, "/api/events", e.body(), true, nil)
}

// body is the event in NoETL's EventRequest shape.
func (e Event) body() map[string]any {
	body := map[string]any{"execution_id": strconv.FormatInt(e.ExecutionID, 10), "step": e.Step, "event_type": e.Type,
		"status": e.Status, "payload": e.Payload, "meta": e.Meta, "worker_id": e.WorkerID}
	if e.ClientID != 0 {
		body["event_id"] = strconv.FormatInt(e.ClientID, 10)
	}
	if e.ResultURI != "" {
		body["result_kind"], body["result_uri"] = "ref", e.ResultURI
	}
	if body["payload"] == nil {
		body["payload"] = map[string]any{}
	}
	return body
}

// Report is our worker's one request per step (POST /api/worker/report):
// the events of any number of executions, the commands it claims (their
// command.issued event ids), and how many more commands it can start now.
type Report struct {
	WorkerID string
	Pool     string
	Take     int
	Events   []Event
	Claims   []int64
}

// Reported is the answer to a Report: one outcome per event and per claim, in
// order, and the commands handed to the worker, already claimed and started
// for it (the claims it got, and those the events issued).
type Reported struct {
	Events   []ReportedEvent
	Claims   []ReportedClaim
	Commands []*Command
}

// ReportedClaim is one claim's outcome: Status 200 (its command is in
// Commands), 404, 409, or 429 with RetryAfter (R-L7).
type ReportedClaim struct {
	EventID    int64
	Status     int
	Error      string
	RetryAfter time.Duration
}

// ReportedEvent is one event's outcome: Status 200, or the error's status
// (404, 409, 422, 5xx) and message.
type ReportedEvent struct {
	Status  int
	Error   string
	EventID int64
}

// Report posts a report. It is retried on 5xx and network errors: its events
// carry client ids, so a re-post is idempotent (commands handed out by a lost
// answer come back to the pool when their lease expires).
func (c *Client) Report(ctx context.Context, r Report) (*Reported, error) {
	events := make([]any, len(r.Events))
	for i, e := range r.Events {
		events[i] = e.body()
	}
	claims := make([]any, len(r.Claims))
	for i, id := range r.Claims {
		claims[i] = strconv.FormatInt(id, 10)
	}
	body := map[string]any{"worker_id": r.WorkerID, "pool": r.Pool, "take": int64(r.Take), "events": events, "claims": claims}
	var out map[string]any
	if err := c.do(ctx, http.MethodPost, "/api/worker/report", body, true, &out); err != nil {
		return nil, err
	}
	res := &Reported{}
	list, _ := out["events"].([]any)
	for _, raw := range list {
		m, _ := raw.(map[string]any)
		st, _ := m["status"].(int64)
		res.Events = append(res.Events, ReportedEvent{Status: int(st), Error: str(m["error"]), EventID: ID(m["event_id"])})
	}
	cl, _ := out["claims"].([]any)
	for _, raw := range cl {
		m, _ := raw.(map[string]any)
		st, _ := m["status"].(int64)
		ra, _ := m["retry_after_seconds"].(int64)
		res.Claims = append(res.Claims, ReportedClaim{EventID: ID(m["event_id"]), Status: int(st), Error: str(m["error"]),
			RetryAfter: time.Duration(ra) * time.Second})
	}
	if len(res.Events) != len(r.Events) || len(res.Claims) != len(r.Claims) {
		return nil, fmt.Errorf("POST /api/worker/report: %d outcomes for %d events and %d for %d claims",
			len(res.Events), len(r.Events), len(res.Claims), len(r.Claims))
	}
	cmds, _ := out["commands"].([]any)
	for _, raw := range cmds {
		if m, ok := raw.(map[string]any); ok {
			res.Commands = append(res.Commands, commandOf(m))
		}
	}
	return res, nil
}

// Health returns GET /api/health.
func (c *Client) Health(ctx context.Context) (map[string]any, error) {
	var out map[string]any
	err := c.do(ctx, http.MethodGet, "/api/health", nil, false, &out)
	return out, err
}

// MarshalIndent pretty-prints a decoded answer for humans.
func MarshalIndent(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
