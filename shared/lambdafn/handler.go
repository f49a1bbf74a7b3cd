// Package lambdafn runs the control plane as AWS Lambda functions: one binary
// per function (functions/<name>), each `lambdafn.Main("<name>")`.
//
// A function's handler takes every kind of invocation it can receive:
//   - an API Gateway HTTP API event (payload format 2.0), converted to an
//     api.Request and served by the function's part of the API (R-A1);
//   - for the outbox function, the EventBridge schedule: `{"maxBatch": n}`
//     (the template's Input) or the raw scheduled event, which runs
//     Service.Drain and prints one CloudWatch Embedded Metric Format line
//     (namespace NoETL, metric OutboxLagSeconds, dimension Stage; the contract
//     is infra/README.md's);
//   - for the schedules function, `{"fire_schedules": true}` (its EventBridge
//     Scheduler entries, its per-minute sweep, the local loop), which runs
//     Service.FireSchedules and answers its report;
//   - anything else (`{"health": true}`, `{}`) is a direct-invoke health
//     probe answered with the health document.
//
// The local server (shared/dev/localgw) invokes the same handlers through
// lambda.NewHandler, so what runs on a laptop is what runs in AWS.
package lambdafn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/noetl-go/noetl/shared/api"
	"github.com/noetl-go/noetl/shared/store"
)

// DefaultMaxBatch is the drain batch of a scheduled event without maxBatch.
const DefaultMaxBatch = 500

// Build makes the function's API for a server URL (what NATS notifications
// tell workers to call back). It must not do I/O: the handler may call it
// again on a later invocation (see Options.ServerURL).
type Build func(serverURL string) (*api.API, error)

// Options configures a Handler.
type Options struct {
	// ServerURL is the configured API base URL. Empty: it is derived from the
	// first API Gateway event (https://<domainName>[/<stage>]), as
	// NOETL_SERVER_URL's contract says; invocations before that (schedule,
	// health) use an API built without one.
	ServerURL string
	// Stage is the EMF Stage dimension (NOETL_STAGE).
	Stage string
	// Metrics receives the EMF lines (default os.Stdout, where Lambda's log
	// capture and CloudWatch's EMF extraction look).
	Metrics io.Writer
	Logger  *slog.Logger
}

// Handler is one function's Lambda handler.
type Handler struct {
	function string
	build    Build
	opts     Options
	log      *slog.Logger

	mu       sync.Mutex
	fixed    *api.Function // built with a known server URL
	fallback *api.Function // built without one, until the URL is known
}

// New returns the handler of function (one of api.Functions()).
func New(function string, build Build, opts Options) (*Handler, error) {
	if opts.Metrics == nil {
		opts.Metrics = os.Stdout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Stage == "" {
		opts.Stage = "local"
	}
	h := &Handler{function: function, build: build, opts: opts, log: opts.Logger}
	// Build now: an unknown function name or a broken build fails the cold
	// start, not the first request.
	fn, err := h.make(opts.ServerURL)
	if err != nil {
		return nil, err
	}
	if opts.ServerURL != "" {
		h.fixed = fn
	} else {
		h.fallback = fn
	}
	return h, nil
}

func (h *Handler) make(serverURL string) (*api.Function, error) {
	a, err := h.build(serverURL)
	if err != nil {
		return nil, fmt.Errorf("%s function: %w", h.function, err)
	}
	return a.Function(h.function)
}

// api returns the function's API; serverURL is what an API Gateway event
// tells about the API's own URL ("" when unknown).
func (h *Handler) api(serverURL string) (*api.Function, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fixed != nil {
		return h.fixed, nil
	}
	if serverURL == "" {
		return h.fallback, nil
	}
	fn, err := h.make(serverURL)
	if err != nil {
		return nil, err
	}
	h.fixed, h.fallback = fn, nil
	h.log.Info("server URL derived from the API Gateway event", "server_url", serverURL)
	return fn, nil
}

// invocation is any event a function receives: an API Gateway HTTP API event
// decoded whole, with the fields that tell the other kinds apart. One decode
// serves every kind: events arrive at every step.
type invocation struct {
	events.APIGatewayV2HTTPRequest
	HTTPMethod string          `json:"httpMethod"` // REST API (payload 1.0) events
	Source     string          `json:"source"`
	DetailType string          `json:"detail-type"`
	MaxBatch   json.RawMessage `json:"maxBatch"`
	// FireSchedules asks the schedules function to fire what is due.
	FireSchedules bool `json:"fire_schedules"`
}

// Handle is the Lambda handler: pass it to lambda.Start, or to
// lambda.NewHandler to invoke it with an event's JSON.
func (h *Handler) Handle(ctx context.Context, event json.RawMessage) (any, error) {
	var ev invocation
	// A payload that is not an object (a bare health ping) is a probe; an
	// API Gateway event that does not decode is an error.
	err := json.Unmarshal(event, &ev)
	switch {
	case ev.RequestContext.HTTP.Method != "":
		if err != nil {
			return nil, fmt.Errorf("decode the API Gateway event: %w", err)
		}
		return h.serveHTTP(ctx, &ev.APIGatewayV2HTTPRequest)
	case ev.HTTPMethod != "":
		return nil, errors.New("API Gateway REST API (payload format 1.0) events are not supported: integrate the function with an HTTP API, payload format 2.0")
	case ev.Source == "aws.events" && ev.DetailType == "Scheduled Event":
		return h.scheduled(ctx, DefaultMaxBatch)
	case ev.FireSchedules:
		return h.fireSchedules(ctx)
	case len(ev.MaxBatch) > 0 && string(ev.MaxBatch) != "null":
		var n int
		if err := json.Unmarshal(ev.MaxBatch, &n); err != nil || n < 1 || n > store.OutboxMaxBatch {
			return nil, fmt.Errorf("maxBatch: expected an integer 1..%d, got %s", store.OutboxMaxBatch, ev.MaxBatch)
		}
		return h.scheduled(ctx, n)
	}
	return h.health(ctx)
}

func (h *Handler) serveHTTP(ctx context.Context, ev *events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	fn, err := h.api(serverURLOf(ev))
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	req, err := ToRequest(ev)
	if err != nil {
		var re *requestError
		if errors.As(err, &re) {
			body, _ := json.Marshal(map[string]any{"error": re.msg, "status": http.StatusBadRequest})
			h := api.JSONHeader()
			h.Set("X-Request-Id", req.RequestID)
			return FromResponse(&api.Response{Status: http.StatusBadRequest, Header: h, Body: body}), nil
		}
		return events.APIGatewayV2HTTPResponse{}, err
	}
	return FromResponse(fn.Serve(ctx, req)), nil
}

// serverURLOf derives the API's base URL from an event: the scheme API
// Gateway forwarded (X-Forwarded-Proto; https when absent), the domain, and
// the stage for a named stage ($default has no path prefix).
func serverURLOf(ev *events.APIGatewayV2HTTPRequest) string {
	d := ev.RequestContext.DomainName
	if d == "" {
		return ""
	}
	scheme := "https"
	if p := ev.Headers["x-forwarded-proto"]; p == "http" || p == "https" {
		scheme = p
	}
	u := scheme + "://" + d
	if s := ev.RequestContext.Stage; s != "" && s != "$default" {
		u += "/" + s
	}
	return u
}

// health answers a direct-invoke probe with the health document (R-A1).
func (h *Handler) health(ctx context.Context) (json.RawMessage, error) {
	fn, err := h.api("")
	if err != nil {
		return nil, err
	}
	_, doc := fn.API().HealthStatus(ctx)
	doc.Function = h.function
	return json.Marshal(doc)
}

// scheduled is the EventBridge run of the outbox function.
func (h *Handler) scheduled(ctx context.Context, maxBatch int) (any, error) {
	if h.function != api.FnOutbox {
		return nil, fmt.Errorf("the %s function has no schedule; only %s drains the outbox", h.function, api.FnOutbox)
	}
	fn, err := h.api("")
	if err != nil {
		return nil, err
	}
	report, err := fn.API().Service().Drain(ctx, maxBatch)
	if report != nil {
		// Every run reports, also a failed one: the lag alarm treats missing
		// data as breaching (infra/README.md).
		if werr := WriteEMF(h.opts.Metrics, h.opts.Stage, report.OutboxLag, time.Now()); werr != nil {
			h.log.ErrorContext(ctx, "write the outbox lag metric", "error", werr.Error())
		}
	}
	if err != nil {
		return nil, fmt.Errorf("drain: %w", err)
	}
	return report, nil
}

// fireSchedules is the schedules function's firing: what its scheduler
// entries, its per-minute sweep and the local loop invoke.
func (h *Handler) fireSchedules(ctx context.Context) (any, error) {
	if h.function != api.FnSchedules {
		return nil, fmt.Errorf("the %s function fires no schedules; only %s does", h.function, api.FnSchedules)
	}
	fn, err := h.api("")
	if err != nil {
		return nil, err
	}
	report, err := fn.API().Service().FireSchedules(ctx)
	if err != nil {
		return report, fmt.Errorf("fire schedules: %w", err)
	}
	return report, nil
}

// WriteEMF writes one CloudWatch Embedded Metric Format record of the outbox
// lag as a single JSON line.
func WriteEMF(w io.Writer, stage string, lag time.Duration, now time.Time) error {
	rec := map[string]any{
		"_aws": map[string]any{
			"Timestamp": now.UnixMilli(),
			"CloudWatchMetrics": []any{map[string]any{
				"Namespace":  "NoETL",
				"Dimensions": [][]string{{"Stage"}},
				"Metrics":    []any{map[string]any{"Name": "OutboxLagSeconds", "Unit": "Seconds"}},
			}},
		},
		"Stage":            stage,
		"OutboxLagSeconds": lag.Seconds(),
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b) // one line, newline-terminated
	if err := enc.Encode(rec); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}
