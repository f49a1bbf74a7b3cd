package api_test

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/api"
	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/wire"
)

// TestClientRequestsMatchDocument: every request body our client sends
// (shared/wire's request types, every field set) is one the OpenAPI document
// describes for its route, so the hand-written body shapes (decode.go's
// rules) and the client's types cannot drift apart. The answers need no such
// test: their shapes are derived from the wire types, and every answer the
// package's tests see is checked against the document (serve).
func TestClientRequestsMatchDocument(t *testing.T) {
	event := wire.EventRequest{ExecutionID: 12, EventFields: wire.EventFields{Step: "s", EventType: "command.completed", Status: "success",
		Payload: wire.Object{"result": map[string]any{"n": int64(1)}}, Meta: wire.OptObject{"attempt": int64(1)},
		WorkerID: "w", EventID: "7", ResultKind: "ref", ResultURI: "s3://b/k"}}
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/api/catalog/register", wire.RegisterRequest{Content: "apiVersion: noetl.io/v2"}},
		{"POST", "/api/execute", wire.ExecuteRequest{Path: "a/b", Version: 2, Payload: wire.Object{"k": "v"},
			ParentExecutionID: 3, Pool: "p", IdempotencyKey: "once"}},
		{"POST", "/api/execute", wire.ExecuteRequest{CatalogID: 4}},
		{"POST", "/api/executions/{id}/cancel", wire.CancelRequest{Reason: "why"}},
		{"POST", "/api/whatif", wire.WhatIfRequest{Path: "a/b", Version: 2, Executions: []wire.ID{7, 8}}},
		{"POST", "/api/whatif", wire.WhatIfRequest{Content: "apiVersion: noetl.io/v2", Select: &wire.WhatIfSelect{Path: "a/b", Status: "FAILED", Since: "24h", Limit: 10}}},
		{"POST", "/api/commands/{event_id}/claim", wire.ClaimRequest{WorkerID: "w", Start: true}},
		{"POST", "/api/commands/{event_id}/heartbeat", wire.HeartbeatRequest{WorkerID: "w", Attempt: 2}},
		{"POST", "/api/events", event},
		{"POST", "/api/worker/report", wire.Report{WorkerID: "w", Pool: "p", Take: 3, Events: []wire.EventRequest{event}, Claims: []wire.ID{9}}},
		{"POST", "/api/worker/report", wire.Report{WorkerID: "w", Claims: []wire.ID{9}}},
		{"POST", "/api/worker/pool/register", wire.PoolRegistration{Name: "w", ComponentType: "worker_pool", Runtime: "go",
			Status: "ready", Capacity: 4, PID: 7, Hostname: "h", Labels: wire.Object{"pool_name": "shared"}, Meta: wire.Object{"started_at": "t"}}},
		{"POST", "/api/worker/pool/heartbeat", wire.PoolBeat{Name: "w"}},
		{"POST", "/api/worker/pool/deregister", wire.PoolBeat{Name: "w"}},
		{"POST", "/api/schedules", wire.ScheduleRequest{PlaybookPath: new("a/b"), PlaybookVersion: new(2), Cron: new("0 * * * *"), Timezone: new("Europe/Berlin"),
			Enabled: new(true), InputPayload: map[string]any{"k": "v"}, Overlap: new("buffer_one"), CatchupSeconds: new(int64(30)), JitterSeconds: new(int64(5)),
			Meta: map[string]any{"owner": "me"}}},
		{"PATCH", "/api/schedules/{id}", wire.ScheduleRequest{Enabled: new(false)}},
		{"PATCH", "/api/schedules/{id}", wire.ScheduleRequest{IntervalSeconds: new(int64(60))}},
		{"POST", "/api/schedules/{id}/backfill", wire.BackfillRequest{From: wire.At(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)), To: wire.At(time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC))}},
		{"POST", "/api/credentials", wire.CredentialRequest{Name: "pg", Type: "postgres", Data: wire.Object{"password": "x"},
			Meta: wire.Object{"env": "prod"}, Tags: []string{"db"}, Description: "d"}},
		{"POST", "/api/credentials/rotate", wire.RotateRequest{NewKey: true, Limit: 10}},
		{"PUT", "/api/result/{execution_id}", wire.StageRequest{Name: "12:s:7/attempt-1.json", Data: json.RawMessage(`{"rows":[1,2]}`)}},
	} {
		raw, err := jsonx.Marshal(c.body)
		if err != nil {
			t.Fatal(err)
		}
		v, err := jsonx.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		op := openAPIDoc()["paths"].(map[string]any)[c.path].(map[string]any)[strings.ToLower(c.method)].(map[string]any)
		sch := op["requestBody"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
		if errs := conform(openAPIDoc(), sch, v, "$"); len(errs) > 0 {
			t.Errorf("%s %s: our client sends %s, which the document does not describe: %s", c.method, c.path, raw, strings.Join(errs, "; "))
		}
	}
}

// TestWireValues pins the API's value conventions as the wire types write
// and read them: ids as decimal strings (R-I2) read from numbers or strings,
// command ids as integers, null for what is unset, times in UTC, and JSON
// values in jsonx's convention (integral numbers int64).
func TestWireValues(t *testing.T) {
	at := time.Date(2026, 11, 24, 10, 0, 0, 5, time.FixedZone("x", 3600))
	got := string(jsonx.MustMarshal(wire.Event{EventID: 1 << 60, ExecutionID: 5, Seq: 2, EventType: "e",
		Meta: wire.OptObject{"n": int64(3)}, ParentEventID: 0, CreatedAt: wire.At(at)}))
	for _, want := range []string{`"event_id":"1152921504606846976"`, `"execution_id":"5"`, `"parent_event_id":null`,
		`"node_name":null`, `"context":null`, `"meta":{"n":3}`, `"created_at":"2026-11-24T09:00:00.000000005Z"`} {
		if !strings.Contains(got, want) {
			t.Errorf("event %s lacks %s", got, want)
		}
	}
	if got := string(jsonx.MustMarshal(wire.Command{EventID: 1 << 60})); !strings.Contains(got, `"event_id":1152921504606846976`) ||
		!strings.Contains(got, `"context":{}`) || !strings.Contains(got, `"lease_expires_at":null`) {
		t.Errorf("command %s: want the integer id, {} for no context and null for no lease", got)
	}

	var c wire.Command
	if err := json.Unmarshal([]byte(`{"event_id":"12","execution_id":34,"context":{"n":3,"f":1.5},"lease_expires_at":null,"worker_id":null}`), &c); err != nil {
		t.Fatal(err)
	}
	if c.EventID != 12 || c.ExecutionID != 34 || c.Context["n"] != int64(3) || c.Context["f"] != 1.5 || !c.LeaseExpiresAt.IsZero() || c.WorkerID != "" {
		t.Errorf("read %+v", c)
	}
	var e wire.Execution
	if err := json.Unmarshal([]byte(`{"execution_id":"9","result":{"big":9007199254740993},"steps":{"s":{"result":[1]}},"error":null}`), &e); err != nil {
		t.Fatal(err)
	}
	if e.ExecutionID != 9 || e.Result.V.(map[string]any)["big"] != int64(9007199254740993) || e.Steps["s"].Result.V.([]any)[0] != int64(1) {
		t.Errorf("read %+v", e)
	}
	for _, bad := range []string{`{"execution_id":"x"}`, `{"execution_id":-1}`, `{"started_at":"yesterday"}`} {
		if err := json.Unmarshal([]byte(bad), &e); err == nil {
			t.Errorf("%s read without an error", bad)
		}
	}
}

// TestWireIDs: ids read from numbers and numeric strings alike, null is
// unset, and anything else is refused with ids.Parse's message.
func TestWireIDs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want wire.ID
		err  string
	}{
		{`12`, 12, ""}, {`"12"`, 12, ""}, {`12.0`, 12, ""}, {`null`, 0, ""}, {`9223372036854775807`, 1<<63 - 1, ""},
		{`-3`, 0, "positive"}, {`"x"`, 0, "numeric string"}, {`1.5`, 0, "integer id"}, {`true`, 0, "boolean"}, {`{}`, 0, "object"},
	} {
		var id wire.ID
		err := json.Unmarshal([]byte(c.in), &id)
		if c.err == "" && (err != nil || id != c.want) {
			t.Errorf("%s: %d %v, want %d", c.in, id, err, c.want)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: %v, want an error saying %q", c.in, err, c.err)
		}
	}
}

// TestRequestLimits: a limit a request type's tags declare (what the decoder
// enforces and the document states) is the one the rest of the code knows.
func TestRequestLimits(t *testing.T) {
	for _, c := range []struct {
		typ   reflect.Type
		field string
		tag   string
		want  int64
	}{
		{reflect.TypeFor[wire.ScheduleRequest](), "CatchupSeconds", "max", controlplane.MaxCatchupSeconds},
		{reflect.TypeFor[wire.ScheduleRequest](), "JitterSeconds", "max", controlplane.MaxJitterSeconds},
		{reflect.TypeFor[wire.BatchRequest](), "Events", "max", api.MaxBatchEvents},
		{reflect.TypeFor[wire.ProjectRequest](), "Events", "max", api.MaxBatchEvents},
		{reflect.TypeFor[wire.CatalogListRequest](), "Limit", "max", api.MaxListLimit},
		{reflect.TypeFor[wire.MarkPublishedRequest](), "OutboxIDs", "max", api.MaxListLimit},
	} {
		f, _ := c.typ.FieldByName(c.field)
		if got, err := strconv.ParseInt(f.Tag.Get(c.tag), 10, 64); err != nil || got != c.want {
			t.Errorf("%s.%s: %s:%q, want %d", c.typ.Name(), c.field, c.tag, f.Tag.Get(c.tag), c.want)
		}
	}
}
