package jsonx

import "fmt"

// FieldError is a request field a reader refused: the field's path and why.
// The API answers it 422 naming the field.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// Refuse is a FieldError for field.
func Refuse(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Fields reads one decoded JSON object's fields, for the API's requests and
// NoETL's workers' events alike; Prefix is the object's path in the request
// ("" for the body, "events[3]" for a batch element). JSON null counts as
// absent everywhere.
type Fields struct {
	Prefix string
	M      map[string]any
}

// Name is k's path in the request.
func (f Fields) Name(k string) string {
	if f.Prefix == "" {
		return k
	}
	return f.Prefix + "." + k
}

// Get returns a field; null counts as absent.
func (f Fields) Get(k string) (any, bool) {
	v, ok := f.M[k]
	return v, ok && v != nil
}

// First returns the first present key of k and its aliases (NoETL's), ""
// when none is; two present with different values are an error naming the
// second.
func (f Fields) First(k string, aliases ...string) (string, any, error) {
	found, val := "", any(nil)
	for _, key := range append([]string{k}, aliases...) {
		v, ok := f.Get(key)
		if !ok {
			continue
		}
		if found == "" {
			found, val = key, v
			continue
		}
		if string(MustMarshal(v)) != string(MustMarshal(val)) {
			return "", nil, Refuse(f.Name(key), "is an alias of %s; give one of them", f.Name(found))
		}
	}
	return found, val, nil
}

// Str reads a string field (or its first alias present); a required one
// must be present and not empty.
func (f Fields) Str(k string, required bool, aliases ...string) (string, error) {
	key, v, err := f.First(k, aliases...)
	if err != nil {
		return "", err
	}
	if key == "" {
		if required {
			return "", Refuse(f.Name(k), "required")
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", Refuse(f.Name(key), "expected string, got %s", TypeName(v))
	}
	if required && s == "" {
		return "", Refuse(f.Name(key), "must not be empty")
	}
	return s, nil
}

// Object reads an object field (nil when absent).
func (f Fields) Object(k string, aliases ...string) (map[string]any, error) {
	key, v, err := f.First(k, aliases...)
	if err != nil || key == "" {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, Refuse(f.Name(key), "expected object, got %s", TypeName(v))
	}
	return m, nil
}

// Array reads an array field; present says whether it was there.
func (f Fields) Array(k string, required bool) (a []any, present bool, err error) {
	v, ok := f.Get(k)
	if !ok {
		if required {
			return nil, false, Refuse(f.Name(k), "required")
		}
		return nil, false, nil
	}
	a, isArr := v.([]any)
	if !isArr {
		return nil, false, Refuse(f.Name(k), "expected array, got %s", TypeName(v))
	}
	return a, true, nil
}
