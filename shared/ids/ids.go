// Package ids holds the arithmetic of shard-resident ids (R-I1) and their wire form
// (R-I2).
//
// An execution, event or outbox id is seq<<10 | shard: seq comes from the shard
// database's own sequence and the low 10 bits name the shard, so routing an id to
// its database is pure arithmetic and adding shards never moves existing rows.
package ids

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

const (
	// ShardBits is the number of low bits that carry the shard index.
	ShardBits = 10
	// MaxShards is the number of shard indexes an id can carry.
	MaxShards = 1 << ShardBits
	// MaxSeq is the largest sequence value that still composes into a positive
	// int64 id below 2^63 (the shard sequences are created with this MAXVALUE).
	MaxSeq = 1<<(63-ShardBits) - 1

	shardMask = MaxShards - 1
)

// ErrInvalid matches (errors.Is) every Parse error, so callers can map it to 422.
var ErrInvalid = errors.New("invalid id")

// parseError keeps the message free of a prefix so it can follow a field name.
type parseError struct{ msg string }

func (e *parseError) Error() string        { return e.msg }
func (e *parseError) Is(target error) bool { return target == ErrInvalid }

// Compose builds the id for sequence value seq on shard shard. It panics when seq is
// outside 1..MaxSeq or shard outside 0..MaxShards-1: both come from our own database
// and configuration, so either is a bug, not bad input.
func Compose(seq int64, shard int) int64 {
	if seq < 1 || seq > MaxSeq {
		panic(fmt.Sprintf("ids: sequence value %d outside 1..%d", seq, int64(MaxSeq)))
	}
	if shard < 0 || shard >= MaxShards {
		panic(fmt.Sprintf("ids: shard %d outside 0..%d", shard, MaxShards-1))
	}
	return seq<<ShardBits | int64(shard)
}

// ShardOf is the shard index an id was allocated on.
func ShardOf(id int64) int { return int(id & shardMask) }

// Format is the JSON-response form of an id: a decimal string (R-I2), because
// browsers lose precision on numbers above 2^53.
func Format(id int64) string { return strconv.FormatInt(id, 10) }

// Parse accepts an id as it arrives in a request (R-I2): a JSON number (int64, or a
// float64/json.Number that is integral) or a string of decimal digits. It rejects
// anything else, zero and negative values. Error messages are written to follow a
// field name: fmt.Errorf("%s: %w", "execution_id", err) reads well.
func Parse(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return positive(x)
	case int:
		return positive(int64(x))
	case int32:
		return positive(int64(x))
	case uint64:
		if x > math.MaxInt64 {
			return 0, invalid("id %d is out of range", x)
		}
		return positive(int64(x))
	case float64:
		return parseFloat(x)
	case float32:
		return parseFloat(float64(x))
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return positive(i)
		}
		f, err := x.Float64()
		if err != nil {
			return 0, invalid("expected an integer id, got number %s", string(x))
		}
		return parseFloat(f)
	case string:
		return parseString(x)
	case nil:
		return 0, invalid("expected an id (integer or numeric string), got null")
	case bool:
		return 0, invalid("expected an id (integer or numeric string), got boolean")
	case map[string]any:
		return 0, invalid("expected an id (integer or numeric string), got object")
	case []any:
		return 0, invalid("expected an id (integer or numeric string), got array")
	default:
		return 0, invalid("expected an id (integer or numeric string), got %T", v)
	}
}

func parseFloat(f float64) (int64, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) {
		return 0, invalid("expected an integer id, got %v", f)
	}
	// 2^63 itself is representable as float64 but not as int64.
	if f >= math.MaxInt64 || f <= math.MinInt64 {
		return 0, invalid("id %v is out of range", f)
	}
	return positive(int64(f))
}

func parseString(s string) (int64, error) {
	if s == "" {
		return 0, invalid("expected an id (integer or numeric string), got an empty string")
	}
	if strings.TrimLeft(s, "0123456789") != "" {
		if strings.HasPrefix(s, "-") && strings.TrimLeft(s[1:], "0123456789") == "" && len(s) > 1 {
			return 0, invalid("id must be positive, got %s", s)
		}
		return 0, invalid("expected an id (integer or numeric string), got %q", truncate(s, 40))
	}
	i, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, invalid("id %s is out of range", truncate(s, 40))
	}
	return positive(i)
}

func positive(i int64) (int64, error) {
	if i <= 0 {
		return 0, invalid("id must be positive, got %d", i)
	}
	return i, nil
}

func invalid(format string, args ...any) error {
	return &parseError{msg: fmt.Sprintf(format, args...)}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
