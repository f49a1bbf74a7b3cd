package replay

import (
	"math"
	"strconv"
	"strings"

	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/lifecycle"
)

// canonicalType maps NoETL's legacy spellings (events.md §3) onto the dotted
// names the fold switches on, by the one vocabulary ingest reads them with
// (eventtype.Canonical), and NoETL 2.x's step_failed, a step.exit of a failed
// step, which only replay meets (old logs). Unknown names pass through unchanged.
func canonicalType(t string) string {
	if t == "step_failed" {
		return eventtype.StepExit
	}
	return eventtype.Canonical(t)
}

// terminalStatus is the execution status a terminal event sets, or "".
func terminalStatus(canonical string) string {
	switch canonical {
	case "playbook.completed", "workflow.completed", "execution.completed":
		return lifecycle.ExecutionCompleted
	case "playbook.failed", "workflow.failed", "execution.failed":
		return lifecycle.ExecutionFailed
	case "playbook.cancelled", "workflow.cancelled", "execution.cancelled":
		return lifecycle.ExecutionCancelled
	}
	return ""
}

// metaString reads an id-like value: a non-empty string or a number.
// Empty strings count as absent, as NoETL's `a or b` chains treat them.
func metaString(m map[string]any, key string) (string, bool) {
	v, ok := m[key]
	if !ok || v == nil {
		return "", false
	}
	s, ok := scalarString(v)
	if !ok || s == "" {
		return "", false
	}
	return s, true
}

// metaInt reads an integer from a JSON value: int64, an integral float or a
// decimal string.
func metaInt(m map[string]any, key string) (int64, bool) {
	return toInt(m[key])
}

func toInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<63 {
			return int64(x), true
		}
	case string:
		if n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64); err == nil {
			return n, true
		}
	}
	return 0, false
}

// present reports a value that NoETL's `or` chains would keep: not null and
// not an empty string. Zero is kept (deliberately: a zero row_count is a fact).
func present(v any) bool {
	if v == nil {
		return false
	}
	if s, ok := v.(string); ok && s == "" {
		return false
	}
	return true
}

func firstPresent(vs ...any) any {
	for _, v := range vs {
		if present(v) {
			return v
		}
	}
	return nil
}

func asObject(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// idValue renders an event id: 0 means none and becomes null.
func idValue(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

// strValue renders an optional string column: "" becomes null.
func strValue(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// payloadRef is the event's payload reference: the payload_ref column, else
// result.reference.
func payloadRef(r *Row) any {
	if r.PayloadRef != nil {
		return r.PayloadRef
	}
	if res := asObject(r.Result); res != nil {
		return res["reference"]
	}
	return nil
}

// payloadSummary flattens a payload reference into the five fields replay
// reports. Columnar references keep their digests under rows_ref.meta or
// rows_ref.ipc, so those are consulted when the top level lacks a field.
func payloadSummary(ref any) map[string]any {
	out := map[string]any{"sha256": nil, "schema_digest": nil, "row_count": nil, "media_type": nil, "ref": nil}
	m := asObject(ref)
	if m == nil {
		return out
	}
	rowsRef := asObject(m["rows_ref"])
	rowsMeta := asObject(rowsRef["meta"])
	rowsIPC := asObject(rowsRef["ipc"])
	pick := func(key string) any {
		return firstPresent(m[key], rowsMeta[key], rowsIPC[key])
	}
	out["sha256"] = jsonx.Clone(firstPresent(pick("sha256"), m["digest"]))
	out["schema_digest"] = jsonx.Clone(pick("schema_digest"))
	out["row_count"] = jsonx.Clone(pick("row_count"))
	out["media_type"] = jsonx.Clone(pick("media_type"))
	out["ref"] = jsonx.Clone(firstPresent(m["ref"], rowsRef["ref"], m["uri"]))
	return out
}

// aggregateID strips the "<kind>/" prefix from aggregate_id when
// aggregate_type is kind.
func aggregateID(r *Row, kind string) (string, bool) {
	if r.AggregateType != kind || r.AggregateID == "" {
		return "", false
	}
	return strings.TrimPrefix(r.AggregateID, kind+"/"), true
}

// The id extractors follow R-X2: column, else aggregate, else meta.

func stageIDOf(r *Row) string { return idOf(r, r.StageID, "stage") }

func frameIDOf(r *Row) string { return idOf(r, r.FrameID, "frame") }

// idOf is the id of a kind (stage, frame) that column holds, else the row's
// aggregate of that kind, else meta's <kind>_id.
func idOf(r *Row, column, kind string) string {
	if column != "" {
		return column
	}
	if id, ok := aggregateID(r, kind); ok {
		return id
	}
	s, _ := metaString(r.Meta, kind+"_id")
	return s
}

func commandIDOf(r *Row) string {
	if r.CommandID != "" {
		return r.CommandID
	}
	s, _ := metaString(r.Meta, "command_id")
	return s
}

func loopIDOf(r *Row) string {
	for _, k := range [...]string{"loop_id", "loop_event_id", "__loop_epoch_id"} {
		if s, ok := metaString(r.Meta, k); ok {
			return s
		}
	}
	return ""
}

// businessObjectOf returns the object's type and id, or ok=false when the
// event names no business object.
func businessObjectOf(r *Row) (typ, id string, ok bool) {
	bo := asObject(r.Meta["business_object"])
	typ = firstString(bo, "object_type", "type")
	if typ == "" {
		typ = firstString(r.Meta, "business_object_type", "object_type")
	}
	id = firstString(bo, "object_id", "id")
	if id == "" {
		id = firstString(r.Meta, "business_object_id", "object_id")
	}
	if r.AggregateType == "business_object" && r.AggregateID != "" {
		var parts []string
		for _, p := range strings.Split(r.AggregateID, "/") {
			if p != "" {
				parts = append(parts, p)
			}
		}
		if len(parts) > 0 && parts[0] == "business_object" {
			parts = parts[1:]
		}
		if len(parts) >= 2 {
			if typ == "" {
				typ = parts[0]
			}
			if id == "" {
				id = strings.Join(parts[1:], "/")
			}
		} else {
			if typ == "" {
				typ = "business_object"
			}
			if id == "" {
				id = r.AggregateID
			}
		}
	}
	return typ, id, typ != "" && id != ""
}

func firstString(m map[string]any, keys ...string) string {
	for _, k := range keys {
		if s, ok := metaString(m, k); ok {
			return s
		}
	}
	return ""
}

// businessObjectStatus: the event's status, else derived from the type suffix.
func businessObjectStatus(eventType, status string) string {
	if status != "" {
		return status
	}
	t := strings.ToLower(eventType)
	switch {
	case strings.HasSuffix(t, ".deleted"), strings.HasSuffix(t, ".removed"):
		return "DELETED"
	case strings.HasSuffix(t, ".created"), strings.HasSuffix(t, ".updated"), strings.HasSuffix(t, ".upserted"):
		return "ACTIVE"
	}
	return ""
}

// visitOf reads our engine's visit number from context, else meta; a missing
// visit counts as the first one so step.enter and its commands still pair up.
func visitOf(r *Row) string {
	if s, ok := metaString(r.Context, "visit"); ok {
		return s
	}
	if s, ok := metaString(r.Meta, "visit"); ok {
		return s
	}
	return "1"
}
