package noetlwire

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// Pool registrations: what NoETL's workers send to the pool routes, read onto
// the worker registry's fields. Both generations register under their worker
// id, which is also the worker_id they claim commands with:
//
//   - the Python worker (noetl/noetl 4.x, nats_worker.py _register_worker), at
//     start and again every 15 s as its heartbeat: {name, component_type:
//     "worker_pool", runtime: "python", status, capacity, pid, hostname,
//     labels: {nats_consumer}, meta: {nats_url, started_at}};
//   - the Rust worker (noetl/worker, control_plane.rs register_worker), once at
//     start: {name, component_type, runtime: {kind: "rust", worker_public_key},
//     status, hostname, labels: {pool_name}}; then POST /api/worker/pool/heartbeat
//     {name} every 15 s.
//
// NoETL's Python server accepts kind as an alias of component_type and coerces
// name, status and hostname to strings; so does this reader.

// Registration is one worker's registration, read.
type Registration struct {
	Name string
	// Runtime is the worker's language: the runtime string (Python worker) or
	// runtime.kind / runtime.type (Rust worker); "unknown" when absent.
	Runtime string
	// Status is what the worker says of itself, lower case; default "ready".
	Status string
	// Capacity is how many commands it runs at once; nil: it did not say.
	Capacity *int
	PID      int64
	Hostname string
	// Pool is the pool it serves: labels.pool_name (Rust worker), labels.pool
	// or labels.worker_pool; DefaultPool when none (NoETL's Python worker names
	// none and serves the shared pool by default).
	Pool   string
	Labels map[string]any
	// Info is NoETL's runtime object as its server stores it: {type, pid,
	// hostname} with the worker's meta and the keys of a runtime object.
	Info map[string]any
	// Instance identifies the process behind the name: a digest of its runtime,
	// pid, hostname and meta (a Python worker's meta.started_at, a Rust
	// worker's per-process worker_public_key). A worker id registered by a new
	// process is a new instance.
	Instance string
}

// PoolHeartbeatInterval is how often NoETL's workers beat (the Python worker
// re-registers, the Rust worker posts a pool heartbeat); ours beats as often.
const PoolHeartbeatInterval = 15 * time.Second

// DefaultPool is the pool of a registration that names none.
const DefaultPool = "shared"

// KindWorkerPool is the one component type the registry keeps.
const KindWorkerPool = "worker_pool"

// MaxWorkerName bounds a registered name (NoETL's names are worker ids such
// as worker-bb96face or a UUID).
const MaxWorkerName = 256

// ReadRegistration reads a registration object; prefix is its path in the
// request ("" for a register body, "registration" inside a heartbeat).
// Unknown fields are ignored.
func ReadRegistration(prefix string, m map[string]any) (Registration, error) {
	at := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	var r Registration
	name, err := WorkerName(at("name"), m["name"])
	if err != nil {
		return r, err
	}
	r.Name = name
	if err := regKind(at, m); err != nil {
		return r, err
	}
	if r.Status, err = regString(at("status"), m["status"]); err != nil {
		return r, err
	}
	r.Status = strings.ToLower(r.Status)
	if r.Status == "" {
		r.Status = "ready"
	}
	if r.Hostname, err = regString(at("hostname"), m["hostname"]); err != nil {
		return r, err
	}
	if v, ok := m["capacity"]; ok && v != nil {
		n, ok := regInteger(v)
		if !ok || n < 0 || n > 1<<31-1 {
			return r, jsonx.Refuse(at("capacity"), "expected a whole number of commands from 0 to %d, got %s", 1<<31-1, regDescribe(v))
		}
		c := int(n)
		r.Capacity = &c
	}
	if v, ok := m["pid"]; ok && v != nil {
		n, ok := regInteger(v)
		if !ok || n < 0 {
			return r, jsonx.Refuse(at("pid"), "expected a process id (a whole number), got %s", regDescribe(v))
		}
		r.PID = n
	}
	if r.Labels, err = regObject(at("labels"), m["labels"]); err != nil {
		return r, err
	}
	meta, err := regObject(at("meta"), m["meta"])
	if err != nil {
		return r, err
	}
	r.Info = map[string]any{}
	maps.Copy(r.Info, meta)
	switch rt := m["runtime"].(type) {
	case nil:
		r.Runtime = "unknown"
	case string:
		r.Runtime = strings.ToLower(strings.TrimSpace(rt))
	case map[string]any:
		maps.Copy(r.Info, rt)
		for _, k := range []string{"kind", "type"} {
			if s, ok := rt[k].(string); ok && strings.TrimSpace(s) != "" {
				r.Runtime = strings.ToLower(strings.TrimSpace(s))
				break
			}
		}
		if r.Runtime == "" {
			return r, jsonx.Refuse(at("runtime"), `an object must name the runtime in kind or type, e.g. {"kind": "rust"}`)
		}
	default:
		return r, jsonx.Refuse(at("runtime"), `expected a string such as "python" or an object such as {"kind": "rust"}, got %s`, jsonx.TypeName(rt))
	}
	if r.Runtime == "" {
		r.Runtime = "unknown"
	}
	r.Info["type"] = r.Runtime
	if r.PID != 0 {
		r.Info["pid"] = r.PID
	}
	if r.Hostname != "" {
		r.Info["hostname"] = r.Hostname
	}
	r.Pool = DefaultPool
	for _, k := range []string{"pool_name", "pool", "worker_pool"} {
		if s, ok := r.Labels[k].(string); ok && strings.TrimSpace(s) != "" {
			r.Pool = strings.TrimSpace(s)
			break
		}
	}
	sum := sha256.Sum256(jsonx.MustMarshal(map[string]any{"runtime": m["runtime"], "pid": r.PID, "hostname": r.Hostname, "meta": meta}))
	r.Instance = hex.EncodeToString(sum[:16])
	return r, nil
}

// ReadWorkerName reads the body of a heartbeat or a deregistration: name,
// and component_type (alias kind), which may only be worker_pool.
func ReadWorkerName(m map[string]any) (string, error) {
	name, err := WorkerName("name", m["name"])
	if err != nil {
		return "", err
	}
	return name, regKind(func(k string) string { return k }, m)
}

// ReadHeartbeat reads a pool heartbeat: its name (ReadWorkerName) and the
// registration it may carry (NoETL's auto-recreation), whose name defaults to
// the heartbeat's and may not differ from it.
func ReadHeartbeat(m map[string]any) (string, *Registration, error) {
	name, err := ReadWorkerName(m)
	if err != nil {
		return "", nil, err
	}
	var body map[string]any
	switch v := m["registration"].(type) {
	case nil:
		return name, nil, nil
	case map[string]any:
		body = v
	default:
		return "", nil, jsonx.Refuse("registration", "expected object, got %s", jsonx.TypeName(v))
	}
	if _, named := body["name"]; !named {
		body = maps.Clone(body)
		body["name"] = name
	}
	r, err := ReadRegistration("registration", body)
	if err != nil {
		return "", nil, err
	}
	if r.Name != name {
		return "", nil, jsonx.Refuse("registration.name", "is %q but the heartbeat is for %q; give one name", r.Name, name)
	}
	return name, &r, nil
}

// WorkerName reads the name a worker registers, heartbeats and deregisters
// under: a string (or a number, as NoETL's server coerces it), trimmed, not
// empty, at most MaxWorkerName bytes.
func WorkerName(field string, v any) (string, error) {
	var s string
	switch x := v.(type) {
	case nil:
		return "", jsonx.Refuse(field, "required: the worker's id, e.g. worker-1")
	case string:
		s = strings.TrimSpace(x)
	case int64:
		s = strconv.FormatInt(x, 10)
	default:
		return "", jsonx.Refuse(field, "expected string, got %s", jsonx.TypeName(v))
	}
	switch {
	case s == "":
		return "", jsonx.Refuse(field, "must not be empty: the worker's id, e.g. worker-1")
	case len(s) > MaxWorkerName:
		return "", jsonx.Refuse(field, "is %d bytes; at most %d", len(s), MaxWorkerName)
	}
	return s, nil
}

// regKind accepts component_type (or its alias kind) when absent or
// worker_pool: the registry keeps workers only.
func regKind(at func(string) string, m map[string]any) error {
	for _, k := range []string{"component_type", "kind"} {
		v, ok := m[k]
		if !ok || v == nil {
			continue
		}
		if s, isStr := v.(string); !isStr || strings.TrimSpace(s) != KindWorkerPool {
			return jsonx.Refuse(at(k), "%s is not served here: only %q components register (workers)", regDescribe(v), KindWorkerPool)
		}
	}
	return nil
}

func regString(field string, v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return strings.TrimSpace(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	}
	return "", jsonx.Refuse(field, "expected string, got %s", jsonx.TypeName(v))
}

func regObject(field string, v any) (map[string]any, error) {
	switch x := v.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return x, nil
	}
	return nil, jsonx.Refuse(field, "expected object, got %s", jsonx.TypeName(v))
}

// regInteger reads a whole number given as a JSON number or a numeric string.
func regInteger(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case float64:
		if x == float64(int64(x)) {
			return int64(x), true
		}
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		return n, err == nil
	}
	return 0, false
}

func regDescribe(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return jsonx.TypeName(v)
}

// The pool routes' bodies as request types (jsonx.Reader): the API decodes
// them as it decodes its own, and the readers above say what they hold.

// ReadJSON reads a register body (ReadRegistration).
func (r *Registration) ReadJSON(path string, v any) (err error) {
	m, _ := v.(map[string]any)
	*r, err = ReadRegistration(path, m)
	return err
}

// PoolHeartbeat is the body of POST /api/worker/pool/heartbeat: the worker,
// and the registration that recreates it when the registry lost it.
type PoolHeartbeat struct {
	Name         string
	Registration *Registration
}

// ReadJSON reads a pool heartbeat (ReadHeartbeat).
func (h *PoolHeartbeat) ReadJSON(_ string, v any) (err error) {
	m, _ := v.(map[string]any)
	h.Name, h.Registration, err = ReadHeartbeat(m)
	return err
}

// Deregistration is the body of POST or DELETE /api/worker/pool/deregister.
type Deregistration struct{ Name string }

// ReadJSON reads a deregistration (ReadWorkerName).
func (d *Deregistration) ReadJSON(_ string, v any) (err error) {
	m, _ := v.(map[string]any)
	d.Name, err = ReadWorkerName(m)
	return err
}
