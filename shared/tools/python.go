package tools

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/resultstore"
	"github.com/noetl-go/noetl/shared/toolkind"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// The harness is a file of its own so it can be read, linted and run by hand.
//
//go:embed harness/harness.py
var harnessFS embed.FS

const harnessName = "harness/harness.py"

// MaxPythonResult bounds the result file a python step leaves: the largest
// result the result store reads back (resultstore.DefaultMaxBytes), so a
// larger one could not be passed on anyway.
const MaxPythonResult = resultstore.DefaultMaxBytes

// runPython runs `code` (rendered by the engine like any config value, as NoETL
// does), `code_b64` or `script` (see pythonSource) in a python3 subprocess through
// the embedded harness (R-P1..R-P3), with `context` holding the render context the
// engine or pipeline passed in Item.Context.
//
// Decisions where the spec is silent are in the package doc.
func (r *Registry) runPython(ctx context.Context, it pipeline.Item) toolresult.Envelope {
	cfg := it.Config
	code, filename, err := r.pythonSource(ctx, cfg)
	if err != nil {
		return failure(toolresult.KindTool, "python: "+err.Error())
	}
	libs := valueOf(cfg, keyNames(toolkind.Python, "libs")...)
	switch libs.(type) {
	case nil, map[string]any, []any:
	default:
		return failure(toolresult.KindTool, fmt.Sprintf("python: libs: expected an object {alias: module}, got %s", jsonx.TypeName(libs)))
	}
	ctx, cancel, env, err := processSettings(ctx, cfg, toolkind.Python)
	if err != nil {
		return failure(toolresult.KindTool, "python: "+err.Error())
	}
	defer cancel()

	call := callFor(ctx, it)
	var execID, step any
	if call.ExecutionID != "" {
		execID = call.ExecutionID
	}
	if call.Step != "" {
		step = call.Step
	}
	req, err := jsonx.Marshal(map[string]any{
		"code": code, "filename": filename, "input": it.Input, "libs": libs,
		"execution_id": execID, "step": step, "context": it.Context,
	})
	if err != nil {
		return failure(toolresult.KindTool, fmt.Sprintf("python: encode the request: %v", err))
	}

	harness, err := fs.ReadFile(harnessFS, harnessName)
	if err != nil {
		return failure(toolresult.KindTool, fmt.Sprintf("python: harness: %v", err))
	}
	d, err := r.newRunDir("noetl-python-", runFile{"noetl_harness.py", harness}, runFile{"request.json", req})
	if err != nil {
		return failure(toolresult.KindTool, "python: "+err.Error())
	}
	defer d.remove()
	dir := d.path
	harnessPath := filepath.Join(dir, "noetl_harness.py")
	reqPath := filepath.Join(dir, "request.json")
	resPath := filepath.Join(dir, "result.json")

	r.log.Debug("python: start", "label", it.Label, "filename", filename, "dir", dir)
	res := runProcess(ctx, procSpec{
		Path:            r.python,
		Args:            []string{"-B", harnessPath, reqPath, resPath},
		Dir:             dir,
		Env:             mergeEnv(r.runEnv(dir), env),
		KillGroupOnExit: true,
		OwnPIDs:         r.ownPIDs(),
		MaxOutput:       r.maxOutput,
		User:            r.user,
	})
	env0 := procEnvelope(res)
	if res.Stopped {
		out := ctxEnvelope(ctx, "python: stopped, process group killed")
		out.Stdout, out.Stderr, out.ExitCode = env0.Stdout, env0.Stderr, env0.ExitCode
		return out
	}
	if res.Err != nil {
		out := failure(toolresult.KindTool, "python: "+res.Err.Error()+r.userNote())
		out.Stdout, out.Stderr = env0.Stdout, env0.Stderr
		return out
	}
	raw, err := d.readResult("result.json", r.maxResult, r.user)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		env0.Status = toolresult.StatusError
		env0.Error = &toolresult.ErrorInfo{Message: "python: the result file: " + err.Error(), Kind: toolresult.KindTool}
		return env0
	}
	if err != nil {
		msg := fmt.Sprintf("python: process exited with code %d without reporting a result", res.ExitCode)
		if res.Signal != "" {
			msg = "python: process killed by signal " + res.Signal + " before reporting a result"
		}
		if l := lastLine(res.Stderr); l != "" {
			msg += ": " + l
		}
		env0.Status = toolresult.StatusError
		env0.Error = &toolresult.ErrorInfo{Message: msg, Kind: toolresult.KindTool}
		return env0
	}
	out, err := jsonx.DecodeObject(raw)
	if err != nil {
		env0.Status = toolresult.StatusError
		env0.Error = &toolresult.ErrorInfo{Message: fmt.Sprintf("python: unreadable result file: %v", err), Kind: toolresult.KindTool}
		return env0
	}
	if ok, _ := out["ok"].(bool); ok {
		env0.Status = toolresult.StatusSuccess
		env0.Data = out["data"]
		return env0
	}
	msg, _ := out["message"].(string)
	if msg == "" {
		msg = "python: the code failed without an error message"
	}
	env0.Status = toolresult.StatusError
	env0.Error = &toolresult.ErrorInfo{Message: msg, Kind: toolresult.KindTool}
	return env0
}

// pidNSProbe is what a worker learnt of pid namespaces: whether it may make
// them, once known (a success or a refusal is kept; a failure that may pass
// is probed again at the next python run).
type pidNSProbe struct {
	mu        sync.Mutex
	known, ok bool
}

// ownPIDs says whether python runs get a pid namespace of their own.
func (r *Registry) ownPIDs() bool { return r.pidNS.get(probeOwnPIDs, r.log) }

// get runs probe until it gives an answer to keep. A root worker that cannot
// make pid namespaces (a sandbox forbids them) says so once: a process a
// python step starts with setsid then outlives the step.
func (p *pidNSProbe) get(probe func() (again bool, err error), log *slog.Logger) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.known {
		return p.ok
	}
	again, err := probe()
	p.ok, p.known = err == nil, !again
	switch {
	case err == nil:
	case again:
		log.Warn("python runs without a pid namespace of its own this time; probing again at the next run", "err", err)
	case os.Geteuid() == 0:
		log.Warn("python steps run without a pid namespace of their own: a process one starts with setsid can outlive it", "err", err)
	default:
		log.Debug("python steps run without a pid namespace of their own", "err", err)
	}
	return p.ok
}

// procEnvelope carries a process's output and exit code; status is filled by the caller.
func procEnvelope(res procResult) toolresult.Envelope {
	env := toolresult.Envelope{Stdout: res.Stdout, Stderr: res.Stderr}
	if res.ExitCode >= 0 {
		code := res.ExitCode
		env.ExitCode = &code
	}
	return env
}

// ResolvePython returns the interpreter's real path (sys.executable). Version
// managers put a shim named python3 on PATH that can cost a second per start; a
// worker resolves it once. With a tool user the name is looked up on PATH as
// that user, so an interpreter it cannot run (one under root's home) is
// skipped for one it can. On any failure it returns name unchanged.
func ResolvePython(ctx context.Context, name string, as *User) string {
	if name == "" {
		name = "python3"
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// Through sh, so PATH is searched by the user that will run it. As the
	// worker it sees what the worker sees (a version manager reads its cwd
	// and environment); a tool user gets the tools' environment in "/".
	spec := procSpec{Path: "/bin/sh", Args: []string{"-c", `exec "$0" -c 'import sys; print(sys.executable)'`, name},
		Env: os.Environ(), MaxOutput: 4096}
	if as != nil {
		spec.Dir, spec.Env, spec.User = "/", baseEnv(), as
	}
	res := runProcess(ctx, spec)
	if res.Err != nil || res.ExitCode != 0 {
		return name
	}
	if p := strings.TrimSpace(res.Stdout); p != "" {
		return p
	}
	return name
}
