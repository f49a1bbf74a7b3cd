package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/toolkind"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// runShell runs `command` with `<shell> -c` (default sh) in its own process group.
//
// Decisions where the spec is silent are in the package doc.
func (r *Registry) runShell(ctx context.Context, it pipeline.Item) toolresult.Envelope {
	cfg := it.Config
	var command string
	switch c := valueOf(cfg, keyNames(toolkind.Shell, "command")...).(type) {
	case string:
		command = c
	case []any:
		lines := make([]string, 0, len(c))
		for i, l := range c {
			s, ok := l.(string)
			if !ok {
				return failure(toolresult.KindTool, fmt.Sprintf("shell: command[%d]: expected a string, got %s", i, jsonx.TypeName(l)))
			}
			lines = append(lines, s)
		}
		command = strings.Join(lines, "\n")
	case nil:
	default:
		return failure(toolresult.KindTool, fmt.Sprintf("shell: command: expected a string, got %s", jsonx.TypeName(c)))
	}
	if strings.TrimSpace(command) == "" {
		return failure(toolresult.KindTool, "shell: command is required")
	}
	shell, err := stringField(cfg, keyNames(toolkind.Shell, "shell")...)
	if err != nil {
		return failure(toolresult.KindTool, "shell: "+err.Error())
	}
	if shell == "" {
		shell = "sh"
	}
	cwd, err := stringField(cfg, keyNames(toolkind.Shell, "cwd")...)
	if err != nil {
		return failure(toolresult.KindTool, "shell: "+err.Error())
	}
	ctx, cancel, env, err := processSettings(ctx, cfg, toolkind.Shell)
	if err != nil {
		return failure(toolresult.KindTool, "shell: "+err.Error())
	}
	defer cancel()

	base := baseEnv()
	if r.user != nil {
		// The worker's cwd, HOME and TMPDIR may be closed to the tool user: the
		// run gets its own directory for all three (cwd only when not given).
		d, err := r.newRunDir("noetl-shell-")
		if err != nil {
			return failure(toolresult.KindTool, "shell: "+err.Error())
		}
		defer d.remove()
		base = r.runEnv(d.path)
		if cwd == "" {
			cwd = d.path
		}
	}
	res := runProcess(ctx, procSpec{
		Path:      shell,
		Args:      []string{"-c", command},
		Dir:       cwd,
		Env:       mergeEnv(base, env),
		MaxOutput: r.maxOutput,
		User:      r.user,
	})
	out := procEnvelope(res)
	var exitCode any
	if out.ExitCode != nil {
		exitCode = int64(*out.ExitCode)
	}
	out.Data = map[string]any{"exit_code": exitCode, "stdout": res.Stdout, "stderr": res.Stderr}
	switch {
	case res.Stopped:
		t := ctxEnvelope(ctx, "shell: stopped, process group killed")
		out.Status, out.Error = t.Status, t.Error
	case res.Err != nil:
		out.Status = toolresult.StatusError
		out.Error = &toolresult.ErrorInfo{Message: "shell: " + res.Err.Error() + r.userNote(), Kind: toolresult.KindTool}
	case res.ExitCode != 0:
		msg := fmt.Sprintf("shell: command exited with code %d", res.ExitCode)
		if res.Signal != "" {
			msg = "shell: command killed by signal " + res.Signal
		}
		if l := lastLine(res.Stderr); l != "" {
			msg += ": " + l
		}
		out.Status = toolresult.StatusError
		out.Error = &toolresult.ErrorInfo{Message: msg, Kind: toolresult.KindTool}
	default:
		out.Status = toolresult.StatusSuccess
	}
	return out
}
