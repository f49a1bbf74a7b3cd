package engine

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// cmdOutcome is what a command.completed/failed/expired means for its command.
type cmdOutcome struct {
	id    string
	cmd   *CommandState
	ok    bool
	class string // for failures: error, timeout, expired
	// final is false when the failure will be retried (R-L3, R-L6).
	final bool
	data  any
	// ref is the URI of a successful result stored by reference (worker.md
	// §1); data is then loaded through the caller (KindReference).
	ref    string
	errMsg string
}

// classify reads a terminal command event against the snapshot before it is
// folded. Only the envelope status fails a command (R-R2); command.completed
// and command.failed decide, using the envelope call.done recorded (R-R3).
func classify(s *Snapshot, ev Event) cmdOutcome {
	oc := cmdOutcome{id: commandID(ev)}
	switch eventtype.Canonical(ev.Type) {
	case eventtype.CommandCompleted, eventtype.CommandFailed, eventtype.CommandExpired:
	default:
		return oc // only terminal command events have an outcome
	}
	oc.cmd = s.Commands[oc.id]
	if oc.cmd == nil {
		return oc
	}
	env := oc.cmd.Envelope
	if env == nil {
		env = envelopeOf(ev)
	}
	status := strings.ToLower(str(env["status"]))
	switch eventtype.Canonical(ev.Type) {
	case eventtype.CommandCompleted:
		switch {
		case status == "timeout":
			oc.class = playbook.ClassTimeout
		case failedStatus(status):
			oc.class = playbook.ClassError
		case env == nil && failedStatus(strings.ToLower(ev.Status)):
			oc.class = playbook.ClassError
		default:
			oc.ok = true
		}
	case eventtype.CommandFailed:
		oc.class = playbook.ClassError
		if c := str(ev.Meta["class"]); c == playbook.ClassTimeout || status == "timeout" {
			oc.class = playbook.ClassTimeout
		}
	case eventtype.CommandExpired:
		oc.class = playbook.ClassExpired
	}
	if oc.ok {
		oc.data, oc.final = env["data"], true
		if _, inline := env["data"]; !inline {
			oc.ref = referenceURI(env)
		}
		return oc
	}
	oc.errMsg = failureMessage(ev, env, oc.class)
	oc.final = s.Status != lifecycle.ExecutionRunning || !retryable(oc.cmd, oc.class, env)
	return oc
}

func failedStatus(s string) bool {
	switch s {
	case "error", "failed", "failure", "timeout":
		return true
	}
	return false
}

// retryable applies the command's retry policy (R-L3): expired leases get at least
// three attempts; error and timeout get retry.max_attempts.
func retryable(c *CommandState, class string, env map[string]any) bool {
	on := c.RetryOn
	if len(on) == 0 {
		on = []string{playbook.ClassError, playbook.ClassTimeout, playbook.ClassExpired}
	}
	if !slices.Contains(on, class) {
		return false
	}
	limit := c.MaxAttempts
	if class == playbook.ClassExpired {
		limit = max(limit, 3)
	}
	if c.Attempt >= limit {
		return false
	}
	if class == playbook.ClassError && len(c.OnStatus) > 0 {
		return slices.Contains(c.OnStatus, httpStatus(env))
	}
	return true
}

// httpStatus finds an HTTP status in a tool envelope (R-W6: error.status, or the
// http tool's data.status_code).
func httpStatus(env map[string]any) int64 {
	if e, ok := env["error"].(map[string]any); ok {
		if s, ok := e["status"].(int64); ok {
			return s
		}
	}
	if d, ok := env["data"].(map[string]any); ok {
		if s, ok := d["status_code"].(int64); ok {
			return s
		}
	}
	return 0
}

// envelopeOf extracts the tool envelope {status, data, error, …} from a worker
// event. Stored results have the shape {status, context: E} (R-R1); a producer
// may also send the envelope flat or inside context.result.
func envelopeOf(ev Event) map[string]any {
	if eventtype.Canonical(ev.Type) == eventtype.CallError {
		msg := ev.Error
		if msg == "" {
			msg = ErrorText(ev.Context["error"])
		}
		if msg == "" {
			msg = "tool error"
		}
		return map[string]any{"status": "error", "error": msg}
	}
	r, _ := ev.Result.(map[string]any)
	if r == nil {
		r, _ = ev.Context["result"].(map[string]any)
	}
	if r == nil {
		return nil
	}
	if inner, ok := r["context"].(map[string]any); ok {
		if _, hasData := r["data"]; !hasData {
			if ref, ok := r["reference"]; ok {
				inner = maps.Clone(inner)
				inner["reference"] = ref
			}
			return inner
		}
	}
	return r
}

// referenceURI is the logical_uri of an envelope's reference (events.md §2:
// {status, reference: {store_tier, logical_uri}}), or "". Multi-part
// references (result_kind "refs": {event_ids, total_parts}) carry no URI and
// are not resolved: the step's data is then null.
func referenceURI(env map[string]any) string {
	ref, _ := env["reference"].(map[string]any)
	uri, _ := ref["logical_uri"].(string)
	return uri
}

func failureMessage(ev Event, env map[string]any, class string) string {
	for _, m := range []string{ev.Error, ErrorText(ev.Context["error"]), ErrorText(env["error"])} {
		if m != "" {
			return m
		}
	}
	switch class {
	case playbook.ClassTimeout:
		return "the command timed out"
	case playbook.ClassExpired:
		return "the command's lease expired and no attempt is left"
	}
	if st := str(env["status"]); st != "" {
		return fmt.Sprintf("the tool returned status %q", st)
	}
	return "the command failed"
}

// ErrorText reads an error given as a string or as {message: …}, the two shapes
// tools and NoETL workers send.
func ErrorText(v any) string {
	switch e := v.(type) {
	case string:
		return e
	case map[string]any:
		if m, ok := e["message"].(string); ok {
			return m
		}
		if len(e) > 0 {
			return fmt.Sprint(e)
		}
	}
	return ""
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// carriesContextUpdates says whether a result's data holds _context_updates
// (splitContextUpdates would change it).
func carriesContextUpdates(data any) bool {
	m, ok := data.(map[string]any)
	if !ok {
		return false
	}
	_, present := m[toolresult.ContextUpdatesKey]
	return present
}

// splitContextUpdates strips _context_updates from a result's data.
func splitContextUpdates(data any) (any, map[string]any) {
	if !carriesContextUpdates(data) {
		return data, nil
	}
	m := data.(map[string]any)
	updates, _ := m[toolresult.ContextUpdatesKey].(map[string]any)
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k != toolresult.ContextUpdatesKey {
			out[k] = v
		}
	}
	return out, updates
}
