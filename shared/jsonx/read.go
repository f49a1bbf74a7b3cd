package jsonx

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// Read fills the struct dst points to from the object f holds: the one
// decoder of the API's request bodies, so that a request is declared once, as
// a Go type. Each exported field with a `json` tag is read under that name,
// or one of NoETL's aliases (`alias:"workload"`; two given with different
// values are refused); null counts as absent. What the field's Go type takes
// decides the rest, with Fields' messages:
//
//   - string, bool, float64 (a number), an integer kind (a number or a
//     numeric string, within `min` and `max`: default the whole int64),
//     map[string]any and types of that kind (an object), []any (an array);
//   - a slice of anything else: an array whose elements are read in turn
//     (`max` bounds how many, a TooMany naming them `items`); a struct: an
//     object read field by field; a pointer: nil when absent;
//   - a type whose pointer is a Reader reads itself (ids, versions, NoETL's
//     string-or-integer fields).
//
// `required:"true"` refuses an absent field (and an empty string);
// `ignored:"true"` documents a field NoETL's clients send that is not read.
// An embedded struct's fields are read inline. After the fields, a type that
// is a Checker checks what spans them. Every refusal is a FieldError naming
// the field's path, or a TooMany.
func Read(f Fields, dst any) error {
	if r, ok := dst.(Reader); ok {
		return r.ReadJSON(f.Prefix, f.M)
	}
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("jsonx.Read: %T is not a pointer to a struct", dst)) // a bug in the caller
	}
	if err := readStruct(f, v.Elem()); err != nil {
		return err
	}
	if c, ok := dst.(Checker); ok {
		return c.Check(f)
	}
	return nil
}

// A Reader is a field type that reads itself from a decoded JSON value
// (never null): path names the value in the request for its FieldErrors.
type Reader interface {
	ReadJSON(path string, v any) error
}

// A Checker is a request type with a rule across its fields (exactly one of
// two, a count over two lists): Read calls Check after reading the fields; f
// is the object read, for the fields' paths.
type Checker interface {
	Check(f Fields) error
}

// TooMany is a list over its limit; the API answers it 413.
type TooMany struct {
	Field string
	N     int
	Max   int
	// Items names what the list holds in the message: "events in one request".
	Items string
}

func (e *TooMany) Error() string {
	return fmt.Sprintf("%s: %d %s; the limit is %d", e.Field, e.N, e.Items, e.Max)
}

func readStruct(f Fields, v reflect.Value) error {
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, hasTag := sf.Tag.Lookup("json")
		if sf.Anonymous && !hasTag && sf.Type.Kind() == reflect.Struct {
			if err := readStruct(f, v.Field(i)); err != nil {
				return err
			}
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if !sf.IsExported() || name == "" || name == "-" || sf.Tag.Get("ignored") == "true" {
			continue
		}
		var aliases []string
		if a := sf.Tag.Get("alias"); a != "" {
			aliases = strings.Split(a, ",")
		}
		key, raw, err := f.First(name, aliases...)
		if err != nil {
			return err
		}
		required := sf.Tag.Get("required") == "true"
		if key == "" {
			if required {
				return Refuse(f.Name(name), "required")
			}
			continue
		}
		if err := readValue(f.Name(key), raw, sf.Tag, v.Field(i), required); err != nil {
			return err
		}
	}
	return nil
}

// readValue reads raw (a field's value or a list's element) into v.
func readValue(path string, raw any, tag reflect.StructTag, v reflect.Value, required bool) error {
	if r, ok := v.Addr().Interface().(Reader); ok {
		return r.ReadJSON(path, raw)
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		if err := readValue(path, raw, tag, p.Elem(), required); err != nil {
			return err
		}
		v.Set(p)
	case reflect.String:
		s, ok := raw.(string)
		if !ok {
			return Refuse(path, "expected string, got %s", TypeName(raw))
		}
		if required && s == "" {
			return Refuse(path, "must not be empty")
		}
		v.SetString(s)
	case reflect.Bool:
		b, ok := raw.(bool)
		if !ok {
			return Refuse(path, "expected boolean, got %s", TypeName(raw))
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		lo, hi := bound(tag, "min", math.MinInt64), bound(tag, "max", math.MaxInt64)
		n, err := IntegerIn(raw, lo, hi)
		if err != nil {
			return Refuse(path, "%s", err.Error())
		}
		v.SetInt(n)
	case reflect.Float64:
		switch x := raw.(type) {
		case int64:
			v.SetFloat(float64(x))
		case float64:
			v.SetFloat(x)
		default:
			return Refuse(path, "expected number, got %s", TypeName(raw))
		}
	case reflect.Map:
		m, ok := raw.(map[string]any)
		if !ok {
			return Refuse(path, "expected object, got %s", TypeName(raw))
		}
		v.Set(reflect.ValueOf(m).Convert(v.Type()))
	case reflect.Interface:
		v.Set(reflect.ValueOf(&raw).Elem())
	case reflect.Slice:
		a, ok := raw.([]any)
		if !ok {
			return Refuse(path, "expected array, got %s", TypeName(raw))
		}
		if v.Type().Elem().Kind() == reflect.Interface {
			v.Set(reflect.ValueOf(a))
			return nil
		}
		if limit := bound(tag, "max", math.MaxInt64); int64(len(a)) > limit {
			return &TooMany{Field: path, N: len(a), Max: int(limit), Items: tag.Get("items")}
		}
		out := reflect.MakeSlice(v.Type(), len(a), len(a))
		for i, e := range a {
			if err := readValue(path+"["+strconv.Itoa(i)+"]", e, "", out.Index(i), false); err != nil {
				return err
			}
		}
		v.Set(out)
	case reflect.Struct:
		m, ok := raw.(map[string]any)
		if !ok {
			return Refuse(path, "expected object, got %s", TypeName(raw))
		}
		return Read(Fields{Prefix: path, M: m}, v.Addr().Interface())
	default:
		panic("jsonx.Read: no reading of a " + v.Type().String()) // a request type using a kind this does not know: a bug
	}
	return nil
}

// Names lists the JSON names of the fields Read reads into the struct dst
// points to, in order.
func Names(dst any) []string {
	var names []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for sf := range t.Fields() {
			tag, hasTag := sf.Tag.Lookup("json")
			if sf.Anonymous && !hasTag && sf.Type.Kind() == reflect.Struct {
				walk(sf.Type)
				continue
			}
			if name, _, _ := strings.Cut(tag, ","); sf.IsExported() && name != "" && name != "-" {
				names = append(names, name)
			}
		}
	}
	walk(reflect.TypeOf(dst).Elem())
	return names
}

// bound reads an integer tag (min, max); def when absent.
func bound(tag reflect.StructTag, key string, def int64) int64 {
	s := tag.Get(key)
	if s == "" {
		return def
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		panic("jsonx.Read: tag " + key + ":" + strconv.Quote(s) + " is not an integer") // a bug in the request type
	}
	return n
}

// ErrNotInteger is what IntegerIn's error wraps when the value is no integer
// at all (rather than one out of range).
var ErrNotInteger = errors.New("not an integer")

// Whole reads an integral number of the convention: an int64, or a float64
// without a fraction (within ±2^62, where a float64 is still exact enough).
func Whole(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<62 {
			return int64(x), true
		}
	}
	return 0, false
}

// Integer reads an integral number (Whole), or a numeric string (what
// NoETL's clients send for counts and ids).
func Integer(v any) (int64, error) {
	if n, ok := Whole(v); ok {
		return n, nil
	}
	switch x := v.(type) {
	case float64:
		return 0, &intError{got: "number " + strconv.FormatFloat(x, 'g', -1, 64)}
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		if err != nil {
			return 0, &intError{got: strconv.Quote(Cut(x, 40))}
		}
		return n, nil
	}
	return 0, &intError{got: TypeName(v)}
}

// IntegerIn reads an integer (Integer) within lo..hi; the error is the
// message a FieldError carries.
func IntegerIn(v any, lo, hi int64) (int64, error) {
	n, err := Integer(v)
	if err != nil {
		return 0, err
	}
	if n < lo || n > hi {
		return 0, RangeError(n, lo, hi)
	}
	return n, nil
}

// RangeError says which end of lo..hi n passes.
func RangeError(n, lo, hi int64) error {
	if n > hi {
		return fmt.Errorf("%d is over the maximum of %d", n, hi)
	}
	return fmt.Errorf("%d is below the minimum of %d", n, lo)
}

type intError struct{ got string }

func (e *intError) Error() string { return "expected integer, got " + e.got }
func (e *intError) Unwrap() error { return ErrNotInteger }

// Cut shortens s to n bytes for a message, marking the cut.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
