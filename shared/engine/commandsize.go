package engine

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/playbook"
)

// What a command carries to its worker (its payload: rendered tool config
// and input, the render context its code reads) is bounded. A command is
// stored in its command.issued event and its row and handed to a worker in
// one answer (an AWS Lambda answers at most 6 MB), so its size is what every
// later step of the run pays to move it.
//
//   - Results the worker stored by reference travel as references
//     (pipeline.RefMarker), whatever their size.
//   - When the caller keeps a result store (Config.PartRef), a command over
//     CommandInlineBytes has its largest values (each at least MinPartBytes)
//     put there as parts (Outcome.Parts), carried as references the worker
//     loads (NoETL offloads a command's context the same way), until it is
//     under CommandInlineBytes.
//   - A command still over MaxCommandBytes fails its step at dispatch,
//     naming the key (CommandTooLargeError), like a render error:
//     deterministic, never retried, on_error applies (R-L6).
const (
	MaxCommandBytes    = 4 << 20
	CommandInlineBytes = 1 << 20
	MinPartBytes       = 64 << 10
)

// CommandPart is a value of a command put in the result store: the caller
// stores Data (JSON) under URI (a reference Config.PartRef made) before it
// commits the command.
type CommandPart struct {
	URI  string
	Data []byte
}

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

// boundCommand keeps a command's payload within the limits above, moving
// its large values to parts when it may; a *CommandTooLargeError when it
// cannot.
func (d *decider) boundCommand(step *playbook.Step, payload map[string]any) error {
	b, err := jsonx.AppendValue(d.sizeBuf[:0], payload)
	if cap(b) <= 64<<10 {
		d.sizeBuf = b // keep small buffers only: a decider lives for one event
	}
	if err != nil {
		return nil // an unencodable payload fails where it is written, with the encoder's error
	}
	size := len(b)
	if d.e.cfg.PartRef != nil && size > CommandInlineBytes {
		size = d.splitCommand(step, payload, size)
	}
	if size <= MaxCommandBytes {
		return nil
	}
	key, keySize := largestMember("", payload)
	if rest, ok := strings.CutPrefix(key+".", "tool_config.args."); ok && payload["args"] != nil {
		key = strings.TrimSuffix("args."+rest, ".") // the step's input, which NoETL's shape carries twice
	}
	if key == "" {
		key = "the payload as a whole"
	}
	return &CommandTooLargeError{Bytes: size, Key: key, KeyBytes: keySize}
}

// splitCommand moves the payload's largest values to parts until it is
// under CommandInlineBytes, and returns its new size.
func (d *decider) splitCommand(step *playbook.Step, payload map[string]any, size int) int {
	type candidate struct {
		container string
		m         map[string]any
		key       string
		data      []byte
	}
	var cands []candidate
	args, _ := payload["args"].(map[string]any)
	tc, _ := payload["tool_config"].(map[string]any)
	argsTwice := isSameMap(tc["args"], args)
	for _, container := range []string{"args", "render_context", "tool_config", "iteration"} {
		m, _ := payload[container].(map[string]any)
		for k, v := range m {
			switch {
			case container == "tool_config" && k == "args" && argsTwice,
				container == "iteration" && k != "item", isMarker(v):
				continue
			}
			data, err := jsonx.Marshal(v)
			if err == nil && len(data) >= MinPartBytes {
				cands = append(cands, candidate{container, m, k, data})
			}
		}
	}
	slices.SortFunc(cands, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(len(b.data), len(a.data)), cmp.Compare(a.container, b.container), cmp.Compare(a.key, b.key))
	})
	moved := false
	for _, c := range cands {
		if size <= CommandInlineBytes {
			break
		}
		sum := sha256.Sum256(c.data)
		uri := d.e.cfg.PartRef(d.run.ExecutionID, step.Name+"."+c.container+"."+c.key, hex.EncodeToString(sum[:16]))
		c.m[c.key] = pipeline.PartMarker(uri)
		d.out.Parts = append(d.out.Parts, CommandPart{URI: uri, Data: c.data})
		times := 1
		if c.container == "args" && argsTwice {
			times = 2 // also under tool_config.args
		}
		size -= times * len(c.data)
		moved = true
	}
	if !moved {
		return size
	}
	b, _ := jsonx.Marshal(payload)
	return len(b)
}

// isSameMap: v is m itself (NoETL's shape puts the input map under args and
// tool_config.args).
func isSameMap(v any, m map[string]any) bool {
	o, ok := v.(map[string]any)
	return ok && m != nil && reflect.ValueOf(o).UnsafePointer() == reflect.ValueOf(m).UnsafePointer()
}

func isMarker(v any) bool {
	m, ok := v.(map[string]any)
	return ok && m[pipeline.RefLoadKey] != nil
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
