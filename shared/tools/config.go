package tools

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/tmpl"
	"github.com/noetl-go/noetl/shared/toolkind"
)

// Config readers. Values are jsonx convention values already rendered; a key that is
// absent or null counts as not given. The first key of a list of aliases that is given
// wins.

// keyNames is what a tool reads for one of its keys: the name and aliases from the
// one table of tool keys (shared/toolkind), which the engine validates against.
func keyNames(kind, name string) []string { return toolkind.KeyNames(kind, name) }

// valueOf is the value of the first given key (nil when none is).
func valueOf(cfg map[string]any, keys ...string) any {
	_, v, _ := first(cfg, keys...)
	return v
}

// first returns the first given key's name and value.
func first(cfg map[string]any, keys ...string) (string, any, bool) {
	for _, k := range keys {
		if v, ok := cfg[k]; ok && v != nil {
			return k, v, true
		}
	}
	return "", nil, false
}

// stringField reads a string; numbers and booleans are taken in text form (a rendered
// `{{ port }}` may be a number where a string is expected).
func stringField(cfg map[string]any, keys ...string) (string, error) {
	k, v, ok := first(cfg, keys...)
	if !ok {
		return "", nil
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case int64, float64, bool:
		return tmpl.Text(x), nil
	default:
		return "", fmt.Errorf("%s: expected a string, got %s", k, jsonx.TypeName(v))
	}
}

// stringKey is a string key (its names: keyNames) and where its value goes.
type stringKey struct {
	names []string
	dst   *string
}

// stringFields reads string keys (stringField) in order; the first that holds
// no string stops it.
func stringFields(cfg map[string]any, keys ...stringKey) error {
	for _, k := range keys {
		v, err := stringField(cfg, k.names...)
		if err != nil {
			return err
		}
		*k.dst = v
	}
	return nil
}

// boolField reads a boolean, also from the strings "true"/"false" (a template rendered
// inside text gives a string).
func boolField(cfg map[string]any, def bool, keys ...string) (bool, error) {
	k, v, ok := first(cfg, keys...)
	if !ok {
		return def, nil
	}
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(x))
		if err != nil {
			return false, fmt.Errorf("%s: expected a boolean, got %q", k, x)
		}
		return b, nil
	default:
		return false, fmt.Errorf("%s: expected a boolean, got %s", k, jsonx.TypeName(v))
	}
}

// numberField reads a number, also from a numeric string: a config value is a
// rendered template, and `{{ x }}` renders to text. The API's obj.number
// (shared/api/decode.go) refuses strings on purpose: a request body holds no
// templates. Two inputs, two rules: not a copy.
func numberField(cfg map[string]any, keys ...string) (float64, bool, error) {
	k, v, ok := first(cfg, keys...)
	if !ok {
		return 0, false, nil
	}
	switch x := v.(type) {
	case int64:
		return float64(x), true, nil
	case float64:
		return x, true, nil
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s: expected a number, got %q", k, x)
		}
		return f, true, nil
	default:
		return 0, false, fmt.Errorf("%s: expected a number, got %s", k, jsonx.TypeName(v))
	}
}

// durationField reads seconds (integral or not).
func durationField(cfg map[string]any, keys ...string) (time.Duration, error) {
	f, ok, err := numberField(cfg, keys...)
	if err != nil || !ok {
		return 0, err
	}
	if math.IsNaN(f) || f < 0 {
		return 0, fmt.Errorf("%s: expected a non-negative number of seconds", keys[0])
	}
	if f > float64(math.MaxInt64/int64(time.Second)) {
		return 0, nil // effectively unbounded: the step deadline still applies
	}
	return time.Duration(f * float64(time.Second)), nil
}

// mapField reads an object.
func mapField(cfg map[string]any, keys ...string) (map[string]any, error) {
	k, v, ok := first(cfg, keys...)
	if !ok {
		return nil, nil
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		return nil, fmt.Errorf("%s: expected an object, got %s", k, jsonx.TypeName(v))
	}
	return m, nil
}

// processSettings reads what a tool that runs a process reads besides its
// program: its environment (env) and its time limit (timeout), the context
// carrying the latter.
func processSettings(ctx context.Context, cfg map[string]any, kind string) (context.Context, context.CancelFunc, []string, error) {
	env, err := envField(cfg, kind)
	if err != nil {
		return ctx, func() {}, nil, err
	}
	ctx, cancel, _, err := withToolTimeout(ctx, cfg)
	if err != nil {
		return ctx, func() {}, nil, err
	}
	return ctx, cancel, env, nil
}

// envField reads an `env` object into NAME=value strings, values in R-T2 text form;
// null values are left out.
func envField(cfg map[string]any, kind string) ([]string, error) {
	m, err := mapField(cfg, keyNames(kind, "env")...)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("env: invalid variable name %q", k)
		}
		if m[k] == nil {
			continue
		}
		out = append(out, k+"="+tmpl.Text(m[k]))
	}
	return out, nil
}
