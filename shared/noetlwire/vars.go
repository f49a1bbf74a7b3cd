package noetlwire

import (
	"maps"
	"slices"
	"strconv"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// Variables is a set of execution variables as POST /api/vars/{execution_id}
// carries it, in any of NoETL's three shapes:
//
//   - its Python server's {variables: {name: value}, var_type?, source_step?}
//     (what its Python worker and external tools send);
//   - its Rust server's {variables: [{var_name, var_value, var_type?,
//     source_step?}]};
//   - its Rust worker's {name: value} (a case action's set_var,
//     src/client/control_plane.rs set_variable): any object without a
//     variables key. A variable literally named variables must use one of
//     the first two shapes.
type Variables struct {
	Values     map[string]any
	Type       string // user_defined (default), step_result, computed, iterator_state
	SourceStep string
}

// Names are the variables' names, sorted.
func (v Variables) Names() []string { return slices.Sorted(maps.Keys(v.Values)) }

// VarTypes are NoETL's variable types.
var VarTypes = []string{"user_defined", "step_result", "computed", "iterator_state"}

// ReadVariables reads a vars body. Names are checked by the caller (they
// write the durable context).
func ReadVariables(m map[string]any) (Variables, error) {
	f := jsonx.Fields{M: m}
	out := Variables{Type: "user_defined", Values: map[string]any{}}
	raw, has := m["variables"]
	if !has {
		for k, v := range m {
			out.Values[k] = v
		}
		if len(out.Values) == 0 {
			return out, jsonx.Refuse("body", "no variables: send {name: value}, or {variables: {name: value}}")
		}
		return out, nil
	}
	var err error
	if out.SourceStep, err = f.Str("source_step", false); err != nil {
		return out, err
	}
	typ, err := f.Str("var_type", false)
	if err != nil {
		return out, err
	}
	switch x := raw.(type) {
	case map[string]any:
		for k, v := range x {
			out.Values[k] = v
		}
	case []any:
		for i, item := range x {
			e, ok := item.(map[string]any)
			p := "variables[" + strconv.Itoa(i) + "]"
			if !ok {
				return out, jsonx.Refuse(p, "expected object {var_name, var_value}")
			}
			ef := jsonx.Fields{Prefix: p, M: e}
			name, err := ef.Str("var_name", true)
			if err != nil {
				return out, err
			}
			if _, dup := out.Values[name]; dup {
				return out, jsonx.Refuse(ef.Name("var_name"), "%q is set twice", name)
			}
			out.Values[name] = e["var_value"]
			if t, err := ef.Str("var_type", false); err != nil {
				return out, err
			} else if t != "" {
				if typ != "" && t != typ {
					return out, jsonx.Refuse(ef.Name("var_type"), "%q differs from another variable's %q: one request sets one type", t, typ)
				}
				typ = t
			}
			if s, err := ef.Str("source_step", false); err != nil {
				return out, err
			} else if s != "" {
				out.SourceStep = s
			}
		}
	default:
		return out, jsonx.Refuse("variables", "expected an object {name: value} or a list of {var_name, var_value}")
	}
	if len(out.Values) == 0 {
		return out, jsonx.Refuse("variables", "must not be empty")
	}
	if typ != "" {
		if !slices.Contains(VarTypes, typ) {
			return out, jsonx.Refuse("var_type", "%q: expected one of user_defined, step_result, computed, iterator_state", typ)
		}
		out.Type = typ
	}
	return out, nil
}

// ReadJSON reads a vars body as a request type (ReadVariables).
func (v *Variables) ReadJSON(_ string, raw any) (err error) {
	m, _ := raw.(map[string]any)
	*v, err = ReadVariables(m)
	return err
}
