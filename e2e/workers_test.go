package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/conformance"
	"github.com/noetl-go/noetl/shared/dev/devserver"
	"github.com/noetl-go/noetl/shared/store/storetest"
	"github.com/noetl-go/noetl/shared/wire"
)

// The worker registry through the whole stack (issue 18): our workers and
// NoETL's register in NoETL's shapes, the registry says who is alive and how
// busy, a pool heartbeat keeps a worker's commands, silence expires it.

// callJSON sends one JSON request without a token and decodes the answer.
func callJSON(t *testing.T, method, u string, body any) (int, map[string]any) {
	t.Helper()
	var rdr io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rdr = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, u, rdr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

// workersOf reads the registry of a pool: name → worker.
func workersOf(t *testing.T, cl *client.Client, pool string) map[string]wire.WorkerPool {
	t.Helper()
	ws, err := cl.Workers(context.Background(), url.Values{"pool": {pool}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]wire.WorkerPool{}
	for _, w := range ws.Items {
		out[w.Name] = w
	}
	return out
}

// eventually polls cond every 50 ms until it holds or a minute passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not so after a minute", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

const sleepyPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: sleepy, path: registry/sleepy}
workflow:
  - step: start
    tool: {kind: shell, command: "sleep 2"}
`

// TestOurWorkersRegister: our workers register when they start (runtime go,
// their pool and capacity), show the command they run as in flight, and are
// offline once they stop.
func TestOurWorkersRegister(t *testing.T) {
	s := shared
	const pool = "registry"
	t.Run("running", func(t *testing.T) {
		s.startWorkers(t, pool, 2)
		eventually(t, "both workers registered", func() bool { return len(workersOf(t, s.cl, pool)) == 2 })
		for name, w := range workersOf(t, s.cl, pool) {
			if !w.Alive || w.Status != "ready" || w.Runtime["type"] != "go" || w.Capacity == nil || *w.Capacity != 4 || w.PID == nil {
				t.Errorf("worker %s is registered as %+v", name, w)
			}
		}
		if _, err := s.cl.Register(context.Background(), sleepyPlaybook); err != nil {
			t.Fatal(err)
		}
		id, err := s.cl.Execute(context.Background(), wire.ExecuteRequest{Path: "registry/sleepy", Pool: pool})
		if err != nil {
			t.Fatal(err)
		}
		busy := func() int {
			n := 0
			for _, w := range workersOf(t, s.cl, pool) {
				n += w.InFlight
			}
			return n
		}
		eventually(t, "a worker holds the sleeping step", func() bool { return busy() == 1 })
		st, err := s.cl.PoolStatus(context.Background())
		if err != nil || st.Workers.InFlight < 1 || st.Workers.Alive < 2 {
			t.Errorf("pool status %+v (%v): want our workers alive and the step in flight", st, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if v, err := s.cl.Wait(ctx, id, 100*time.Millisecond); err != nil || v.Status != "COMPLETED" {
			t.Fatalf("the sleepy run: %v %v", v, err)
		}
		if n := busy(); n != 0 {
			t.Errorf("after the run %d commands are in flight, want 0", n)
		}
	})
	// The subtest's end stopped its workers: they deregistered.
	eventually(t, "both workers offline", func() bool {
		ws := workersOf(t, s.cl, pool)
		for _, w := range ws {
			if w.Status != "offline" || w.Alive {
				return false
			}
		}
		return len(ws) == 2
	})
}

// TestPoolHeartbeatKeepsLeases: NoETL's Rust worker's only liveness signal is
// its pool heartbeat. A worker that beats keeps the command it holds past
// three leases and completes it once; one that does not loses it when the
// lease runs out.
func TestPoolHeartbeatKeepsLeases(t *testing.T) {
	s := shared
	ctx := context.Background()
	const pool = "rustpool"
	if _, err := s.cl.Register(ctx, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: held, path: registry/held}
workflow:
  - step: start
    tool: {kind: noop}
`); err != nil {
		t.Fatal(err)
	}
	register := func(name string) {
		code, out := callJSON(t, "POST", s.srv.URL+"/api/worker/pool/register", map[string]any{"name": name, "component_type": "worker_pool",
			"runtime": map[string]any{"kind": "rust", "worker_public_key": "a2V5LW9mLQ=="}, "status": "ready", "hostname": "pod",
			"labels": map[string]any{"pool_name": pool}})
		if code != 200 {
			t.Fatalf("register %s: %d %v", name, code, out)
		}
	}
	// claim starts an execution in the pool and claims its command as worker.
	claim := func(worker string) (int64, string) {
		id, err := s.cl.Execute(ctx, wire.ExecuteRequest{Path: "registry/held", Pool: pool})
		if err != nil {
			t.Fatal(err)
		}
		sh, err := s.srv.Store.ShardFor(id)
		if err != nil {
			t.Fatal(err)
		}
		cmds, err := storetest.ActiveCommands(ctx, sh.Pool(), id)
		if err != nil || len(cmds) != 1 {
			t.Fatalf("execution %d: commands %v %v", id, cmds, err)
		}
		cmd, err := s.cl.Claim(ctx, cmds[0].IssuedEventID, worker, false)
		if err != nil {
			t.Fatal(err)
		}
		return id, cmd.CommandID
	}
	register("rust-keeper")
	register("rust-silent")
	kept, keptCmd := claim("rust-keeper")
	lost, _ := claim("rust-silent")

	// Three leases and a bit, a beat every sixth of a lease (NoETL's workers
	// beat every 15 s against a 60 s lease); the drain runs every 500 ms.
	for end := time.Now().Add(3*lease + time.Second); time.Now().Before(end); time.Sleep(lease / 6) {
		if code, out := callJSON(t, "POST", s.srv.URL+"/api/worker/pool/heartbeat", map[string]any{"name": "rust-keeper"}); code != 200 {
			t.Fatalf("pool heartbeat: %d %v", code, out)
		}
	}
	if n := count(s.events(t, lost), "command.expired", "start"); n != 1 {
		t.Fatalf("the silent worker's command expired %d times, want once (the drain expires what nobody keeps)", n)
	}
	if n := count(s.events(t, kept), "command.expired", "start"); n != 0 {
		t.Fatalf("the beating worker's command expired %d times, want never", n)
	}
	err := s.cl.PostEvent(ctx, wire.EventRequest{ExecutionID: wire.ID(kept), EventFields: wire.EventFields{Step: "start", EventType: "command.completed", Status: "success",
		WorkerID: "rust-keeper", Payload: wire.Object{"command_id": keptCmd, "result": map[string]any{"status": "success", "data": map[string]any{"kept": true}}},
		Meta: wire.OptObject{"command_id": keptCmd, "attempt": int64(1)}}})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	v, err := s.cl.Wait(wctx, kept, 100*time.Millisecond)
	if err != nil || v.Status != "COMPLETED" {
		t.Fatalf("the kept command's execution: %v %v", v, err)
	}
	evs := s.events(t, kept)
	if count(evs, "command.claimed", "start") != 1 || count(evs, "command.completed", "start") != 1 {
		t.Errorf("the kept command was claimed %d and completed %d times, want once each",
			count(evs, "command.claimed", "start"), count(evs, "command.completed", "start"))
	}
}

// TestNoETLWorkerRegistrations: the pool requests NoETL's Python worker made
// (../shared/conformance/noetl-worker, recorded when we answered 404) get 2xx
// in NoETL's shapes, and a registered worker silent past the TTL expires.
func TestNoETLWorkerRegistrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, err := devserver.Start(ctx, devserver.Options{Getenv: throwawayEnv, WorkerTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cl := client.New(srv.URL, "")

	files, err := filepath.Glob(filepath.Join(conformance.Dir(t), "noetl-worker", "wire*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recordings: %v", err)
	}
	replayed := map[string]int{}
	names := map[string]bool{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var ex struct {
				Method, Path, Req string
			}
			if err := json.Unmarshal(sc.Bytes(), &ex); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if !strings.Contains(ex.Path, "/pool/") {
				continue
			}
			var body any
			if ex.Req != "" {
				if err := json.Unmarshal([]byte(ex.Req), &body); err != nil {
					t.Fatal(err)
				}
				if m, ok := body.(map[string]any); ok {
					names[m["name"].(string)] = true
				}
			}
			code, out := callJSON(t, ex.Method, srv.URL+ex.Path, body)
			if code/100 != 2 {
				t.Fatalf("%s %s %s: %d %v", ex.Method, ex.Path, ex.Req, code, out)
			}
			if ex.Path == "/api/pool/status" {
				// What NoETL's adaptive concurrency reads.
				for _, k := range []string{"pool_min", "pool_max", "pool_size", "pool_available", "requests_waiting", "utilization", "slots_available", "status"} {
					if _, ok := out[k]; !ok {
						t.Fatalf("GET /api/pool/status lacks NoETL's %s: %v", k, out)
					}
				}
			}
			replayed[ex.Method+" "+ex.Path]++
		}
		fh.Close()
	}
	if replayed["POST /api/worker/pool/register"] == 0 || replayed["GET /api/pool/status"] == 0 {
		t.Fatalf("replayed %v: want NoETL's registrations and status reads", replayed)
	}
	t.Logf("replayed %v", replayed)

	// The recorded worker is registered in NoETL's shape; silent, it expires.
	ws, err := cl.Workers(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws.Items) != len(names) {
		t.Fatalf("the registry lists %d workers, the recordings register %d", len(ws.Items), len(names))
	}
	name := ws.Items[0].Name
	w := ws.Items[0]
	if !names[name] || w.Runtime["type"] != "python" || w.Pool != "shared" || w.Labels["nats_consumer"] != "noetl_worker_pool" || w.Capacity == nil || *w.Capacity != 1 {
		t.Errorf("the recorded worker is registered as %+v", w)
	}
	eventually(t, "the silent worker expired", func() bool {
		ws, err := cl.Workers(ctx, url.Values{"status": {"expired"}})
		return err == nil && len(ws.Items) == len(names)
	})
	// A pool heartbeat (the Rust worker's) keeps a worker alive past the TTL.
	code, out := callJSON(t, "POST", srv.URL+"/api/worker/pool/heartbeat", map[string]any{"name": name})
	if code != 200 || out["status"] != "ok" {
		t.Fatalf("heartbeat of an expired worker: %d %v", code, out)
	}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		callJSON(t, "POST", srv.URL+"/api/worker/pool/heartbeat", map[string]any{"name": name})
		ws, err := cl.Workers(ctx, url.Values{"status": {"alive"}})
		if err != nil || len(ws.Items) != 1 || ws.Items[0].Name != name {
			t.Fatalf("beating every 500 ms with a 2 s TTL the worker is not alive: %+v %v", ws, err)
		}
	}
}
