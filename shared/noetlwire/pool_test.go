package noetlwire

import (
	"strings"
	"testing"
)

// TestReadRegistration reads both NoETL workers' registrations (the Python
// worker's as recorded in ../shared/conformance/noetl-worker/wire.jsonl, the
// Rust worker's as control_plane.rs builds it) onto the registry's fields.
func TestReadRegistration(t *testing.T) {
	py := `{"name": "worker-bb96face", "component_type": "worker_pool", "runtime": "python", "status": "ready", "capacity": 1,
		"pid": 6098, "hostname": "unknown", "labels": {"nats_consumer": "noetl_worker_pool"},
		"meta": {"nats_url": "nats://127.0.0.1:44519", "started_at": "2026-11-26T20:51:36.308412+00:00"}}`
	r, err := ReadRegistration("", decode(t, py))
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "worker-bb96face" || r.Runtime != "python" || r.Status != "ready" || r.Capacity == nil || *r.Capacity != 1 ||
		r.PID != 6098 || r.Pool != DefaultPool || r.Info["type"] != "python" || r.Info["started_at"] == nil || r.Info["pid"] != int64(6098) {
		t.Errorf("the Python worker's registration read as %+v", r)
	}
	again, _ := ReadRegistration("", decode(t, py))
	restarted, _ := ReadRegistration("", decode(t, strings.Replace(py, "20:51:36", "21:00:00", 1)))
	if again.Instance != r.Instance || restarted.Instance == r.Instance {
		t.Errorf("instances: same process %v, restarted process %v; want equal, then different", again.Instance == r.Instance, restarted.Instance == r.Instance)
	}

	rs, err := ReadRegistration("", decode(t, `{"name": "5b4f", "component_type": "worker_pool",
		"runtime": {"kind": "rust", "worker_public_key": "a2V5"}, "status": "READY", "hostname": "pod-7", "labels": {"pool_name": "worker-rust-pool"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if rs.Runtime != "rust" || rs.Status != "ready" || rs.Capacity != nil || rs.Pool != "worker-rust-pool" || rs.Info["worker_public_key"] != "a2V5" {
		t.Errorf("the Rust worker's registration read as %+v", rs)
	}
	if m, _ := ReadRegistration("", decode(t, `{"name": 12, "kind": "worker_pool"}`)); m.Name != "12" || m.Runtime != "unknown" || m.Status != "ready" {
		t.Errorf("a numeric name and nothing else read as %+v", m)
	}

	for body, field := range map[string]string{
		`{}`:             "name",
		`{"name": "  "}`: "name",
		`{"name": "w", "component_type": "broker"}`: "component_type",
		`{"name": "w", "runtime": 3}`:               "runtime",
		`{"name": "w", "runtime": {"pid": 1}}`:      "runtime",
		`{"name": "w", "capacity": 1.5}`:            "capacity",
		`{"name": "w", "capacity": -1}`:             "capacity",
		`{"name": "w", "pid": "x"}`:                 "pid",
		`{"name": "w", "labels": []}`:               "labels",
		`{"name": "w", "meta": "m"}`:                "meta",
		`{"name": "w", "hostname": {}}`:             "hostname",
	} {
		_, err := ReadRegistration("", decode(t, body))
		if fe, ok := err.(*FieldError); !ok || fe.Field != field {
			t.Errorf("%s: %v, want a refusal naming %s", body, err, field)
		}
	}
}

// TestReadHeartbeat: a heartbeat names its worker; a registration it carries
// takes that name and may not give another.
func TestReadHeartbeat(t *testing.T) {
	name, reg, err := ReadHeartbeat(decode(t, `{"name": "w1"}`))
	if err != nil || name != "w1" || reg != nil {
		t.Fatalf("{name}: %q %v %v", name, reg, err)
	}
	name, reg, err = ReadHeartbeat(decode(t, `{"name": "w1", "registration": {"runtime": "python", "capacity": 2}}`))
	if err != nil || reg == nil || reg.Name != "w1" || *reg.Capacity != 2 {
		t.Fatalf("with a registration: %q %+v %v", name, reg, err)
	}
	for body, field := range map[string]string{
		`{"name": "w1", "registration": {"name": "w2"}}`:    "registration.name",
		`{"name": "w1", "registration": "again"}`:           "registration",
		`{"name": "w1", "registration": {"capacity": "x"}}`: "registration.capacity",
		`{"registration": {"name": "w1"}}`:                  "name",
	} {
		_, _, err := ReadHeartbeat(decode(t, body))
		if fe, ok := err.(*FieldError); !ok || fe.Field != field {
			t.Errorf("%s: %v, want a refusal naming %s", body, err, field)
		}
	}
}
