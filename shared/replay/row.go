package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// Row is one event as the fold sees it: the parity data set's columns
// (events.json) plus the columns of our own event table. Empty strings stand
// for SQL NULL; maps and Result follow the jsonx convention.
type Row struct {
	// Seq is the total order of the execution's log (1, 2, …); the fold
	// requires it to increase strictly.
	Seq       int64
	EventID   int64 // 0 = no id (rendered as null)
	EventType string
	NodeName  string
	NodeType  string
	Status    string

	StageID       string
	FrameID       string
	CommandID     string
	WorkerID      string
	AggregateType string
	AggregateID   string

	Context map[string]any
	Meta    map[string]any
	Result  any
	// PayloadRef is NoETL's optional payload_ref column; when nil the payload
	// reference is result.reference.
	PayloadRef any
	Error      string
	CreatedAt  time.Time
}

// ReadRows streams a JSON array of rows shaped like the parity data set's
// events.json, calling fn once per element in order. Only one element is
// decoded at a time, so the array's size does not bound memory. Integers stay
// exact (ids may be JSON numbers or strings, above 2^53 included). A row
// without "seq" gets its 1-based position in the array. An error returned by
// fn stops the read and is returned wrapped (errors.Is still sees it).
func ReadRows(r io.Reader, fn func(Row) error) error {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("replay: read rows: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("replay: read rows: expected a JSON array, got %v", tok)
	}
	for pos := int64(1); dec.More(); pos++ {
		var v any
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("replay: row %d: %w", pos, err)
		}
		obj, ok := jsonx.Normalize(v).(map[string]any)
		if !ok {
			return fmt.Errorf("replay: row %d: expected a JSON object, got %s", pos, jsonx.TypeName(v))
		}
		row, err := RowFromObject(obj, pos)
		if err != nil {
			return fmt.Errorf("replay: row %d: %w", pos, err)
		}
		if err := fn(row); err != nil {
			return fmt.Errorf("replay: row %d: %w", pos, err)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing ']'
		return fmt.Errorf("replay: read rows: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("replay: read rows: unexpected data after the array")
	}
	return nil
}

// RowFromObject converts one decoded JSON object (jsonx convention) into a
// Row. defaultSeq is used when the object has no "seq" key. Unknown keys are
// ignored so that wider exports (execution_id, tenant_id, …) still load.
func RowFromObject(obj map[string]any, defaultSeq int64) (Row, error) {
	var row Row
	var err error
	if row.Seq, err = idField(obj, "seq"); err != nil {
		return Row{}, err
	}
	if row.Seq == 0 {
		row.Seq = defaultSeq
	}
	if row.EventID, err = idField(obj, "event_id"); err != nil {
		return Row{}, err
	}
	strFields := []struct {
		key string
		dst *string
	}{
		{"event_type", &row.EventType}, {"node_name", &row.NodeName}, {"node_type", &row.NodeType},
		{"status", &row.Status}, {"stage_id", &row.StageID}, {"frame_id", &row.FrameID},
		{"command_id", &row.CommandID}, {"worker_id", &row.WorkerID},
		{"aggregate_type", &row.AggregateType}, {"aggregate_id", &row.AggregateID}, {"error", &row.Error},
	}
	for _, f := range strFields {
		if *f.dst, err = stringField(obj, f.key); err != nil {
			return Row{}, err
		}
	}
	if row.Context, err = objectField(obj, "context"); err != nil {
		return Row{}, err
	}
	if row.Meta, err = objectField(obj, "meta"); err != nil {
		return Row{}, err
	}
	row.Result = obj["result"]
	row.PayloadRef = obj["payload_ref"]
	if s, err := stringField(obj, "created_at"); err != nil {
		return Row{}, err
	} else if s != "" {
		t, perr := time.Parse(time.RFC3339Nano, s)
		if perr != nil {
			return Row{}, fmt.Errorf("created_at: %w", perr)
		}
		row.CreatedAt = t
	}
	return row, nil
}

// idField reads an integer id given as a JSON number or a decimal string;
// absent or null gives 0.
func idField(obj map[string]any, key string) (int64, error) {
	switch v := obj[key].(type) {
	case nil:
		return 0, nil
	case int64:
		return v, nil
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<63 {
			return int64(v), nil
		}
		return 0, fmt.Errorf("%s: %v is not an integer", key, v)
	case string:
		if v == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q is not an integer: %w", key, v, err)
		}
		return n, nil
	default:
		return 0, fmt.Errorf("%s: expected a number or a string, got %s", key, jsonx.TypeName(v))
	}
}

// stringField reads a text column; numbers are formatted exactly (command_id
// 9001 becomes "9001"), null gives "".
func stringField(obj map[string]any, key string) (string, error) {
	v := obj[key]
	if v == nil {
		return "", nil
	}
	if s, ok := scalarString(v); ok {
		return s, nil
	}
	return "", fmt.Errorf("%s: expected a string or a number, got %s", key, jsonx.TypeName(v))
}

func objectField(obj map[string]any, key string) (map[string]any, error) {
	switch v := obj[key].(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return v, nil
	default:
		return nil, fmt.Errorf("%s: expected an object or null, got %s", key, jsonx.TypeName(v))
	}
}

// scalarString formats a JSON scalar as an id string. Integral floats print
// without a fraction so 9001.0 and 9001 name the same command.
func scalarString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case int64:
		return strconv.FormatInt(x, 10), true
	case int:
		return strconv.Itoa(x), true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<63 {
			return strconv.FormatInt(int64(x), 10), true
		}
		return strconv.FormatFloat(x, 'g', -1, 64), true
	case json.Number:
		return x.String(), true
	case bool:
		return strconv.FormatBool(x), true
	default:
		return "", false
	}
}
