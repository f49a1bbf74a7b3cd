// Package client is a Go client for the control plane's HTTP API (api.md), used
// by the worker, the CLI and the playbook tool. Requests and answers are
// shared/wire's types, the ones the server writes, so a changed field fails a
// compile here rather than a type assertion at run time.
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
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/wire"
)

// Client calls one control plane.
type Client struct {
	base  string
	token string
	http  *http.Client
	// Retries is how often an idempotent call is retried on 5xx or a network
	// error (worker.md §1.5); default 5.
	Retries int
	// Patience is how long an idempotent call keeps retrying while the
	// server answers that it is unavailable for now and when to come back
	// (503 with Retry-After: its database is restarting or failing over),
	// waiting at least that long each time; default 2 minutes, longer than a
	// failover.
	Patience time.Duration
	// sleep waits between attempts and now reads the clock (tests record
	// the waits and move a clock of their own instead).
	sleep func(ctx context.Context, d time.Duration) error
	now   func() time.Time
	// maxAnswer bounds one answer read into memory; MaxAnswerBytes unless
	// WithMaxAnswerBytes says otherwise.
	maxAnswer int
}

// Option configures a Client.
type Option func(*Client)

// WithTransport sends requests through rt (to count or trace them, say)
// instead of the client's own pooled transport.
func WithTransport(rt http.RoundTripper) Option {
	return func(c *Client) { c.http.Transport = rt }
}

// WithMaxAnswerBytes bounds the answers the client reads (default
// MaxAnswerBytes); a larger answer is an *AnswerTooLargeError.
func WithMaxAnswerBytes(n int) Option {
	return func(c *Client) { c.maxAnswer = n }
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
		http: &http.Client{Timeout: 60 * time.Second, Transport: tr}, Retries: 5, Patience: 2 * time.Minute, maxAnswer: MaxAnswerBytes}
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

// Unavailable reports whether err says the server (or what it needs, its
// database) cannot be reached for now, so the same request can succeed
// later: no answer at all, or 502, 503 or 504. The caller's own context
// ending is not.
func Unavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || TooLarge(err) {
		return false
	}
	switch StatusOf(err) {
	case 0, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// TooLarge reports whether err is an answer over the client's limit
// (*AnswerTooLargeError): the server answered, and asking again gets the
// same answer, so it is a refusal, never an outage.
func TooLarge(err error) bool {
	var e *AnswerTooLargeError
	return errors.As(err, &e)
}

// RetryAfterOf is the Retry-After of an *Error, 0 when it has none.
func RetryAfterOf(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}

// withQuery is path with the query, when it has one.
func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// call is do for an answer that is one JSON object: a new T, or the error.
func call[T any](ctx context.Context, c *Client, method, path string, body any, idempotent bool) (*T, error) {
	var out T
	if _, err := c.do(ctx, method, path, body, idempotent, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// do sends one request; idempotent requests are retried on 5xx and network
// errors, with capped exponential backoff and jitter, Retries times — and,
// while the server answers when to come back (Retry-After), for up to
// Patience, waiting at least that long. out, when not nil, receives the
// decoded JSON answer; the answer's headers are returned.
func (c *Client) do(ctx context.Context, method, path string, body any, idempotent bool, out any) (http.Header, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = jsonx.Marshal(body); err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", method, path, err)
		}
	}
	clock := c.now
	if clock == nil {
		clock = time.Now
	}
	began := clock()
	for i := 0; ; i++ {
		hdr, err := c.once(ctx, method, path, payload, out)
		if err == nil {
			return hdr, nil
		}
		if s := StatusOf(err); !idempotent || (s != 0 && s < 500) || TooLarge(err) || ctx.Err() != nil {
			return nil, err // the server answered, or must not be asked twice
		}
		wait := Backoff(i)
		if ra := RetryAfterOf(err); ra > 0 {
			if clock().Sub(began)+ra > c.Patience {
				return nil, err
			}
			wait = max(wait, min(ra, time.Minute))
		} else if i >= c.Retries {
			return nil, err
		}
		if serr := c.pause(ctx, wait); serr != nil {
			return nil, errors.Join(err, serr)
		}
	}
}

// Backoff is the wait before retry i+1 (i from 0): 200 ms doubling to a cap
// of 10 s, each drawn between half of that and all of it (jitter), so that
// many callers who failed together do not come back together.
func Backoff(i int) time.Duration {
	d := min(200*time.Millisecond*time.Duration(uint(1)<<min(i, 6)), MaxBackoff)
	return d/2 + rand.N(d/2+1)
}

// MaxBackoff is the longest wait Backoff gives.
const MaxBackoff = 10 * time.Second

func (c *Client) pause(ctx context.Context, d time.Duration) error {
	if c.sleep != nil {
		return c.sleep(ctx, d)
	}
	return sleepCtx(ctx, d)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (c *Client) once(ctx context.Context, method, path string, payload []byte, out any) (http.Header, error) {
	var rdr io.Reader
	if payload != nil {
		rdr = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rdr)
	if err != nil {
		return nil, err
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	tooLarge := &AnswerTooLargeError{Method: method, Path: path, Limit: c.maxAnswer, Bytes: resp.ContentLength}
	if resp.ContentLength > int64(c.maxAnswer) {
		return nil, tooLarge // not read at all
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, int64(c.maxAnswer)+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if len(raw) > c.maxAnswer {
		return nil, tooLarge
	}
	if resp.StatusCode >= 300 {
		e := &Error{Status: resp.StatusCode, Message: strings.TrimSpace(string(raw))}
		var body struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(raw, &body) == nil && body.Error != "" {
			e.Message = body.Error
		}
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			if secs, err := strconv.ParseFloat(ra, 64); err == nil {
				e.RetryAfter = time.Duration(secs * float64(time.Second))
			}
		}
		return nil, e
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return nil, fmt.Errorf("%s %s: the answer does not read as %T: %w", method, path, out, err)
		}
	}
	return resp.Header, nil
}

// MaxAnswerBytes bounds one answer the client reads into memory.
const MaxAnswerBytes = 64 << 20

// AnswerTooLargeError is an answer over the client's limit (MaxAnswerBytes
// by default): it is not read, and the error says which limit it passed (an
// execution's whole view can; its summary, ?view=summary, and its paged
// events cannot).
type AnswerTooLargeError struct {
	Method, Path string
	Limit        int
	Bytes        int64 // the answer's Content-Length; -1 when not given
}

func (e *AnswerTooLargeError) Error() string {
	size := "larger than"
	if e.Bytes > 0 {
		size = fmt.Sprintf("%d bytes, over", e.Bytes)
	}
	return fmt.Sprintf("%s %s: the answer is %s this client's limit of %s (client.MaxAnswerBytes); ask for less (GET /api/executions/{id}?view=summary leaves out the steps, the events route pages)",
		e.Method, e.Path, size, sizeText(e.Limit))
}

// sizeText is n bytes in MiB when whole, else in bytes.
func sizeText(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// ID reads an id given as a number or a numeric string (a NATS
// notification's event_id, say); 0 when it is neither.
func ID(v any) int64 {
	id, err := ids.Parse(v)
	if err != nil {
		return 0
	}
	return id
}

// ---- catalog and executions ----

// Register registers a playbook's YAML.
func (c *Client) Register(ctx context.Context, content string) (*wire.Registered, error) {
	return call[wire.Registered](ctx, c, http.MethodPost, "/api/catalog/register", wire.RegisterRequest{Content: content}, true)
}

// Execute starts an execution (set Path or CatalogID) and returns its id.
func (c *Client) Execute(ctx context.Context, r wire.ExecuteRequest) (int64, error) {
	var out wire.Started
	// Without an idempotency key a retried execute could start two runs.
	if _, err := c.do(ctx, http.MethodPost, "/api/execute", r, r.IdempotencyKey != "", &out); err != nil {
		return 0, err
	}
	return int64(out.ExecutionID), nil
}

// WhatIf asks what a new playbook version would have done on recorded
// executions (POST /api/whatif): nothing runs and nothing is written, so it
// is safe to retry.
func (c *Client) WhatIf(ctx context.Context, r wire.WhatIfRequest) (*wire.WhatIf, error) {
	return call[wire.WhatIf](ctx, c, http.MethodPost, "/api/whatif", r, true)
}

func executionPath(id int64) string { return "/api/executions/" + strconv.FormatInt(id, 10) }

// Execution returns GET /api/executions/{id}.
func (c *Client) Execution(ctx context.Context, id int64) (*wire.Execution, error) {
	return call[wire.Execution](ctx, c, http.MethodGet, executionPath(id), nil, true)
}

// ExecutionSummary returns GET /api/executions/{id}?view=summary: the execution
// without its steps and events (status, context, result, error).
func (c *Client) ExecutionSummary(ctx context.Context, id int64) (*wire.Execution, error) {
	return call[wire.Execution](ctx, c, http.MethodGet, executionPath(id)+"?view=summary", nil, true)
}

// Status returns GET /api/executions/{id}/status.
func (c *Client) Status(ctx context.Context, id int64) (*wire.Status, error) {
	return call[wire.Status](ctx, c, http.MethodGet, executionPath(id)+"/status", nil, true)
}

// Events returns one page of an execution's events after afterSeq and the
// next page's after_seq (0 on the last page).
func (c *Client) Events(ctx context.Context, id, afterSeq int64, limit int) ([]wire.Event, int64, error) {
	q := url.Values{}
	if afterSeq > 0 {
		q.Set("after_seq", strconv.FormatInt(afterSeq, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := withQuery(executionPath(id)+"/events", q)
	var out wire.EventPage
	if _, err := c.do(ctx, http.MethodGet, path, nil, true, &out); err != nil {
		return nil, 0, err
	}
	var next int64
	if out.NextAfterSeq != nil {
		next = *out.NextAfterSeq
	}
	return out.Events, next, nil
}

// ListExecutions returns one page of GET /api/executions with the given query
// (path, status, limit ≤ 100, offset, cursor, …) and the cursor of the next
// page ("" at the end). The body is NoETL's bare array; the cursor travels in
// the X-Next-Cursor header.
func (c *Client) ListExecutions(ctx context.Context, q url.Values) ([]wire.ExecutionSummary, string, error) {
	path := withQuery("/api/executions", q)
	var rows []wire.ExecutionSummary
	hdr, err := c.do(ctx, http.MethodGet, path, nil, true, &rows)
	if err != nil {
		return nil, "", err
	}
	return rows, hdr.Get("X-Next-Cursor"), nil
}

// Redrive continues a FAILED or CANCELLED execution in place under version
// (0: its own).
func (c *Client) Redrive(ctx context.Context, id int64, version int) (*wire.Redriven, error) {
	return call[wire.Redriven](ctx, c, http.MethodPost, executionPath(id)+"/redrive", wire.RedriveRequest{Version: version}, true)
}

// RedriveMany redrives up to 100 executions, each once.
func (c *Client) RedriveMany(ctx context.Context, ids []int64, version int) (*wire.RedriveBatch, error) {
	req := wire.RedriveManyRequest{Executions: make([]wire.ID, len(ids)), Version: version}
	for i, id := range ids {
		req.Executions[i] = wire.ID(id)
	}
	return call[wire.RedriveBatch](ctx, c, http.MethodPost, "/api/executions/redrive", req, true)
}

// Cancel cancels an execution and its children; the answer's Already says
// how one that had already ended ended.
func (c *Client) Cancel(ctx context.Context, id int64, reason string) (*wire.CancelAnswer, error) {
	return call[wire.CancelAnswer](ctx, c, http.MethodPost, executionPath(id)+"/cancel", wire.CancelRequest{Reason: reason}, true)
}

// Replay returns the replay document (replay.md, written by shared/replay)
// with the given query parameters. It is free-form by design: its
// projections are chosen by the query.
func (c *Client) Replay(ctx context.Context, id int64, q url.Values) (wire.Object, error) {
	path := withQuery(executionPath(id)+"/replay", q)
	var out wire.Object
	_, err := c.do(ctx, http.MethodGet, path, nil, true, &out)
	return out, err
}

// Wait polls an execution's status until it ends or ctx is done, then returns
// its whole view. A server that is unavailable for a while (Unavailable:
// restarting, or its database failing over) is waited out, however long ctx
// allows.
func (c *Client) Wait(ctx context.Context, id int64, every time.Duration) (*wire.Execution, error) {
	return c.wait(ctx, id, every, c.Execution)
}

// WaitSummary is Wait returning the execution's summary (no steps, no events):
// what a caller waiting for the outcome needs, whatever the size of the steps.
func (c *Client) WaitSummary(ctx context.Context, id int64, every time.Duration) (*wire.Execution, error) {
	return c.wait(ctx, id, every, c.ExecutionSummary)
}

func (c *Client) wait(ctx context.Context, id int64, every time.Duration, view func(context.Context, int64) (*wire.Execution, error)) (*wire.Execution, error) {
	for {
		st, err := c.Status(ctx, id)
		switch {
		case err != nil && !Unavailable(err):
			return nil, err
		case err == nil && lifecycle.ExecutionEnded(st.Status):
			v, err := view(ctx, id)
			if Unavailable(err) {
				break // it ended; ask again once the server is back
			}
			return v, err
		}
		wait := every
		if err != nil {
			wait = max(every, RetryAfterOf(err), time.Second)
		}
		if err := c.pause(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// ---- worker protocol ----

func commandPath(eventID int64) string { return "/api/commands/" + strconv.FormatInt(eventID, 10) }

// Claim claims the command a notification announced. start records the
// start with the claim (the caller runs the command at once), so no
// command.started is posted.
func (c *Client) Claim(ctx context.Context, eventID int64, workerID string, start bool) (*wire.Command, error) {
	out, err := call[wire.Command](ctx, c, http.MethodPost, commandPath(eventID)+"/claim", wire.ClaimRequest{WorkerID: workerID, Start: start}, true)
	if err != nil {
		return nil, err
	}
	fillCommand(out)
	return out, nil
}

// fillCommand takes command_id and attempt from meta when the body leaves
// them out (NoETL's server carries them there).
func fillCommand(cmd *wire.Command) {
	if cmd.CommandID == "" {
		cmd.CommandID, _ = cmd.Meta["command_id"].(string)
	}
	if a, ok := cmd.Meta["attempt"].(int64); ok && cmd.Attempt == 0 {
		cmd.Attempt = int(a)
	}
}

// Heartbeat extends the lease of a held command. It is sent once: the
// caller heartbeats again at its next beat (the worker backs off while the
// server is unavailable).
func (c *Client) Heartbeat(ctx context.Context, eventID int64, workerID string, attempt int) (time.Time, error) {
	var out wire.Lease
	if _, err := c.once(ctx, http.MethodPost, commandPath(eventID)+"/heartbeat", jsonx.MustMarshal(wire.HeartbeatRequest{WorkerID: workerID, Attempt: attempt}), &out); err != nil {
		return time.Time{}, err
	}
	return out.LeaseExpiresAt.Time, nil
}

// PostEvent posts one event; it is retried on 5xx since its client id makes it
// idempotent.
func (c *Client) PostEvent(ctx context.Context, e wire.EventRequest) error {
	_, err := c.do(ctx, http.MethodPost, "/api/events", e, true, nil)
	return err
}

// Report posts a report, once: the worker's reporter retries it, with one
// backoff for all its reports while the server is unavailable. Its events
// carry client ids, so a re-post is idempotent (commands handed out by a
// lost answer come back to the pool when their lease expires).
func (c *Client) Report(ctx context.Context, r wire.Report) (*wire.Reported, error) {
	var out wire.Reported
	payload, err := jsonx.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode POST /api/worker/report: %w", err)
	}
	if _, err := c.once(ctx, http.MethodPost, "/api/worker/report", payload, &out); err != nil {
		return nil, err
	}
	if len(out.Events) != len(r.Events) || len(out.Claims) != len(r.Claims) {
		return nil, fmt.Errorf("POST /api/worker/report: %d outcomes for %d events and %d for %d claims",
			len(out.Events), len(r.Events), len(out.Claims), len(r.Claims))
	}
	for i := range out.Commands {
		fillCommand(&out.Commands[i])
	}
	return &out, nil
}

// StageResult hands the server a result too large to post inline (PUT
// /api/result/{execution_id}, at most wire.MaxStagedResultBytes of body)
// and returns its noetl:// reference. It is sent once: the worker waits
// out an unavailable server itself.
func (c *Client) StageResult(ctx context.Context, executionID int64, r wire.StageRequest) (*wire.StagedResult, error) {
	var out wire.StagedResult
	payload, err := jsonx.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode PUT /api/result: %w", err)
	}
	if _, err := c.once(ctx, http.MethodPut, "/api/result/"+strconv.FormatInt(executionID, 10), payload, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ResolveResult reads the JSON a result reference names (GET
// /api/result/resolve): a noetl:// reference, or a URI inside the server's
// result store. It is sent once, like StageResult.
func (c *Client) ResolveResult(ctx context.Context, ref string) ([]byte, error) {
	var out json.RawMessage
	if _, err := c.once(ctx, http.MethodGet, "/api/result/resolve?ref="+url.QueryEscape(ref), nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// ---- the worker registry ----

// RegisterWorker registers (or re-registers) a worker.
func (c *Client) RegisterWorker(ctx context.Context, r wire.PoolRegistration) (*wire.PoolRegistered, error) {
	return call[wire.PoolRegistered](ctx, c, http.MethodPost, "/api/worker/pool/register", r, true)
}

// WorkerHeartbeat is a worker's pool heartbeat; a 404 (StatusOf) means the
// registry does not know it: register again.
func (c *Client) WorkerHeartbeat(ctx context.Context, name string) (*wire.PoolRegistered, error) {
	return call[wire.PoolRegistered](ctx, c, http.MethodPost, "/api/worker/pool/heartbeat", wire.PoolBeat{Name: name}, true)
}

// DeregisterWorker marks a worker offline.
func (c *Client) DeregisterWorker(ctx context.Context, name string) error {
	_, err := c.do(ctx, http.MethodPost, "/api/worker/pool/deregister", wire.PoolBeat{Name: name}, true, nil)
	return err
}

// Workers returns GET /api/worker/pools with the given query (runtime,
// status, pool, limit).
func (c *Client) Workers(ctx context.Context, q url.Values) (*wire.WorkerPools, error) {
	path := withQuery("/api/worker/pools", q)
	return call[wire.WorkerPools](ctx, c, http.MethodGet, path, nil, true)
}

// Doctor returns GET /api/doctor: the executions that break the liveness
// invariant, at most limit of them.
func (c *Client) Doctor(ctx context.Context, limit int) (*wire.Doctor, error) {
	return call[wire.Doctor](ctx, c, http.MethodGet, "/api/doctor?limit="+strconv.Itoa(limit), nil, true)
}

// PoolStatus returns GET /api/pool/status.
func (c *Client) PoolStatus(ctx context.Context) (*wire.PoolStatus, error) {
	return call[wire.PoolStatus](ctx, c, http.MethodGet, "/api/pool/status", nil, true)
}

// Health returns GET /api/health.
func (c *Client) Health(ctx context.Context) (*wire.Health, error) {
	return call[wire.Health](ctx, c, http.MethodGet, "/api/health", nil, false)
}

// MarshalIndent pretty-prints a decoded answer for humans.
func MarshalIndent(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
