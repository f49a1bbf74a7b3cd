package engine

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// MaxCommandBytes bounds what one command carries to its worker: its payload
// (rendered tool config and input, the render context its code reads) as
// JSON. A command is stored in its command.issued event and its row, and
// handed to a worker in one answer (an AWS Lambda answers at most 6 MB), so
// its size is what every later step of the run pays to move it. Results the
// worker stored by reference travel as references (pipeline.RefMarker), so
// only values rendered into the command count; a command over the limit
// fails its step at dispatch, naming the key (CommandTooLargeError), like a
// render error: deterministic, never retried, on_error applies (R-L6).
const MaxCommandBytes = 4 << 20

// CommandTooLargeError is a command over MaxCommandBytes: its size and the
// member that makes most of it.
type CommandTooLargeError struct {
	Bytes    int
	Key      string // a dotted path into the payload, e.g. args.rows
	KeyBytes int
}

func (e *CommandTooLargeError) Error() string {
	return fmt.Sprintf("%d bytes of JSON, over the limit of %d (engine.MaxCommandBytes, 4 MiB); %s is %d bytes of it: "+
		"pass a large result by reference instead of rendering it into the step (read it in the step's code, context['<step>'], "+
		"or hand {{ <step>._ref }} to the artifact tool)", e.Bytes, MaxCommandBytes, e.Key, e.KeyBytes)
}

// checkCommandSize returns a *CommandTooLargeError when payload is over
// MaxCommandBytes. buf is scratch space kept between calls.
func checkCommandSize(payload map[string]any, buf *[]byte) error {
	b, err := jsonx.AppendValue((*buf)[:0], payload)
	if cap(b) <= 64<<10 {
		*buf = b // keep small buffers only: a decider lives for one event
	}
	if err != nil || len(b) <= MaxCommandBytes {
		return nil // an unencodable payload fails where it is written, with the encoder's error
	}
	key, size := largestMember("", payload)
	if rest, ok := strings.CutPrefix(key, "tool_config.args."); ok && payload["args"] != nil {
		key = "args." + rest // the step's input, which NoETL's shape carries twice
	}
	if key == "" {
		key = "the payload as a whole"
	}
	return &CommandTooLargeError{Bytes: len(b), Key: key, KeyBytes: size}
}

// largestMember follows the largest member of v down through objects while
// it is a large part of the limit, returning its path and size.
func largestMember(path string, v any) (string, int) {
	b, _ := jsonx.Marshal(v)
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return path, len(b)
	}
	best, bestSize := "", -1
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kb, _ := jsonx.Marshal(m[k])
		if len(kb) > bestSize {
			best, bestSize = k, len(kb)
		}
	}
	if bestSize < MaxCommandBytes/8 {
		return path, len(b) // no one member stands out
	}
	return largestMember(jsonx.PathKey(path, best), m[best])
}
