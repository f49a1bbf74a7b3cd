package duckdb

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// value converts what the driver returns into the jsonx convention, as the
// postgres tool writes PostgreSQL's values: integers int64 (beyond int64, exact
// text), DATE as YYYY-MM-DD, TIMESTAMP as UTC RFC 3339, JSON decoded, lists and
// structs as JSON arrays and objects, MAP as an object (keys in text form),
// DECIMAL as an integer when integral else a float, UUID in its text form, BLOB
// as base64, non-finite floats as text, INTERVAL and the rest as text.
func value(typ string, v any) any {
	if typ == "JSON" && v != nil {
		// The driver decodes JSON with floats: take integers back exactly as
		// far as float64 kept them.
		if b, err := json.Marshal(v); err == nil {
			if d, err := jsonx.Decode(b); err == nil {
				return d
			}
		}
	}
	switch x := v.(type) {
	case nil, bool, string, int64:
		return x
	case int8, int16, int32, uint8, uint16, uint32:
		return jsonx.Normalize(x)
	case uint64:
		if x > math.MaxInt64 { // exact, as text
			return strconv.FormatUint(x, 10)
		}
		return int64(x)
	case float32:
		return float(float64(x))
	case float64:
		return float(x)
	case *big.Int:
		if x.IsInt64() {
			return x.Int64()
		}
		return x.String()
	case duckdb.Decimal:
		return decimal(x)
	case time.Time:
		switch {
		case typ == "DATE":
			return x.Format(time.DateOnly)
		case strings.HasPrefix(typ, "TIME") && !strings.HasPrefix(typ, "TIMESTAMP"):
			return x.Format("15:04:05.999999")
		}
		return x.UTC().Format(time.RFC3339Nano)
	case []byte:
		if typ == "UUID" && len(x) == 16 {
			return fmt.Sprintf("%x-%x-%x-%x-%x", x[0:4], x[4:6], x[6:8], x[8:10], x[10:16])
		}
		return base64.StdEncoding.EncodeToString(x)
	case duckdb.UUID:
		return x.String()
	case []any:
		out := make([]any, len(x))
		elem := strings.TrimSuffix(typ, "[]")
		for i, e := range x {
			out[i] = value(elem, e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = value("", e)
		}
		return out
	case duckdb.OrderedMap:
		out := make(map[string]any, x.Len())
		keys, vals := x.Keys(), x.Values()
		for i := range keys {
			out[fmt.Sprint(value("", keys[i]))] = value("", vals[i])
		}
		return out
	case duckdb.Map:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(value("", k))] = value("", e)
		}
		return out
	case duckdb.Interval:
		return fmt.Sprintf("%d months %d days %d microseconds", x.Months, x.Days, x.Micros)
	}
	return fmt.Sprint(v)
}

func float(f float64) any {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return f
}

// decimal: an integer when integral (exact text beyond int64), else a float.
func decimal(d duckdb.Decimal) any {
	if d.Value == nil {
		return nil
	}
	r := new(big.Rat).SetFrac(d.Value, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d.Scale)), nil))
	if r.IsInt() {
		if r.Num().IsInt64() {
			return r.Num().Int64()
		}
		return r.Num().String()
	}
	f, _ := r.Float64()
	return f
}

func jsonText(v any) string {
	b, err := jsonx.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
