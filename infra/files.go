package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Route is one entry of routes.json (the repository's single source of truth
// for routes). infra/ reads the file rather than importing the root module,
// which would drag the functions' dependencies into the CDK build.
type Route struct {
	Method   string `json:"method"`
	Path     string `json:"path"`
	Function string `json:"function"`
}

// Function describes one Lambda: its directory under functions/ and build/,
// and its logical id (the same as template.yaml's, so SAM and CDK stacks name
// things alike).
type Function struct {
	Name      string
	LogicalID string
	// Scheduled functions run every minute and must finish inside it;
	// HTTP functions are cut off by API Gateway at 30 s anyway.
	TimeoutSeconds float64
	Description    string
}

// Functions returns the eight functions in a stable order.
func Functions() []Function {
	return []Function{
		{"catalog", "CatalogFunction", 29, "NoETL catalog: register, list and get playbooks"},
		{"execute", "ExecuteFunction", 29, "NoETL execute: start executions, issue their first commands"},
		{"ingest", "IngestFunction", 29, "NoETL ingest: worker events and orchestration"},
		{"claim", "ClaimFunction", 29, "NoETL claim: get, claim and heartbeat commands"},
		{"status", "StatusFunction", 29, "NoETL status: health, executions, events, cancel, finalize"},
		{"replay", "ReplayFunction", 29, "NoETL replay: fold an execution's event log into projections"},
		{"outbox", "OutboxFunction", 55, "NoETL outbox: drain notifications, expire leases, issue due retries (scheduled); internal routes"},
		{"schedules", "SchedulesFunction", 55, "NoETL schedules: the schedule routes; fires what is due (EventBridge Scheduler entries, per-minute sweep)"},
		{"keychain", "KeychainFunction", 29, "NoETL keychain: credentials sealed with KMS, their reads logged"},
	}
}

// ReadRoutes reads and checks routes.json.
func ReadRoutes(path string) ([]Route, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading routes: %w (infra/ expects ../routes.json, the repository's route table)", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var routes []Route
	if err := dec.Decode(&routes); err != nil {
		return nil, fmt.Errorf("%s: %w; want [{\"method\", \"path\", \"function\"}, ...]", path, err)
	}
	known := map[string]bool{}
	for _, f := range Functions() {
		known[f.Name] = true
	}
	seen := map[string]bool{}
	for i, r := range routes {
		key := r.Method + " " + r.Path
		switch {
		case !known[r.Function]:
			return nil, fmt.Errorf("%s: route %d (%s) names unknown function %q", path, i, key, r.Function)
		case !validMethod(r.Method):
			return nil, fmt.Errorf("%s: route %d has method %q; use one of GET, POST, PUT, PATCH, DELETE", path, i, r.Method)
		case !strings.HasPrefix(r.Path, "/"):
			return nil, fmt.Errorf("%s: route %d path %q must start with /", path, i, r.Path)
		case seen[key]:
			return nil, fmt.Errorf("%s: route %s is listed twice", path, key)
		}
		seen[key] = true
	}
	return routes, nil
}

func validMethod(m string) bool {
	return slices.Contains([]string{"GET", "POST", "PUT", "PATCH", "DELETE"}, m)
}

// EnvFile is config-env.json: the environment variables shared/config reads,
// by where they are set. infra/ sets exactly Functions[fn] on each function.
type EnvFile struct {
	Functions map[string][]string `json:"functions"`
	SAMOnly   []string            `json:"sam_only"`
	Local     []string            `json:"local"`
	Runtime   []string            `json:"runtime"`
}

// ReadEnvFile reads config-env.json.
func ReadEnvFile(path string) (*EnvFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the env list: %w (infra/ expects ../config-env.json)", err)
	}
	var f EnvFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, fn := range Functions() {
		if _, ok := f.Functions[fn.Name]; !ok {
			return nil, fmt.Errorf("%s: functions.%s is missing", path, fn.Name)
		}
	}
	return &f, nil
}

// Uses reports whether function fn reads env var name.
func (f *EnvFile) Uses(fn, name string) bool { return slices.Contains(f.Functions[fn], name) }
